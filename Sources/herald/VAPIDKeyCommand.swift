import ArgumentParser
import Foundation
import HeraldCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// `herald vapid-key`: makes an app's VAPID key pair for Web Push.
struct VAPIDKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vapid-key",
        abstract: "Make a VAPID key pair for sending to browsers (Web Push).",
        discussion: """
            Writes the private key (PEM, P-256) to FILE with mode 0600 and prints the public key, \
            base64url: give it to the web app as applicationServerKey when it subscribes, and point \
            herald.app_webpush.vapid_key_file at FILE. With --show, prints the public key of an existing FILE.
            """)

    @Argument(help: "Where the private key is written (or read, with --show).") var file: String
    @Flag(help: "Print the public key of an existing key file instead of making one.") var show = false

    func run() throws {
        let key: CryptoKey
        if show {
            key = try CryptoKey(privateKeyFile: file, what: "VAPID key")
        } else {
            guard !FileManager.default.fileExists(atPath: file) else {
                throw ValidationError(
                    "\(file) exists; a new key would orphan every browser subscribed with the old one")
            }
            key = try CryptoKey.generateP256()
            let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard descriptor >= 0 else {
                throw ValidationError("cannot create \(file): \(String(cString: strerror(errno)))")
            }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: Data(try key.privateKeyPEM().utf8))
        }
        print(Base64URL.encode(try key.publicPoint()))
    }
}
