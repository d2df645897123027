/// Herald's version: `herald --version` prints it, and `scripts/package.sh` names the Debian
/// package after it. Raise it here, and only here.
public enum HeraldVersion {
    public static let current = "0.11.0"
}
