import Foundation
import HeraldCrypto
import HeraldFCM

/// A generated service account's key file in the temporary directory, so test runs leave no
/// private keys behind: removed by `remove()`, or with this object. A test whose daemon reads
/// the file later calls `remove()` in a `defer`, which also keeps the object alive until then.
public final class ServiceAccountFile: Sendable {
    public let path: String

    public init(_ account: ServiceAccount) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString).json").path
        try account.writeFile(to: path)
    }

    public func remove() { unlink(path) }

    deinit { remove() }
}

/// A fresh VAPID private key in a temporary PEM file (mode 0600), removed when released.
public final class VAPIDKeyFile: Sendable {
    private let file: SecretFile
    public var path: String { file.path }
    /// The public key, base64url: what a web app subscribes with.
    public let publicKey: String

    public init() throws {
        let key = try CryptoKey.generateP256()
        file = try SecretFile(contents: try key.privateKeyPEM(), suffix: ".pem")
        publicKey = Base64URL.encode(try key.publicPoint())
    }
}

/// A file of secret contents (a key, a certificate) in the temporary directory, mode 0600,
/// removed when released.
public final class SecretFile: Sendable {
    public let path: String

    public init(contents: String, suffix: String = "") throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)\(suffix)").path
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(contents.utf8), attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown) }
    }

    deinit { unlink(path) }
}
