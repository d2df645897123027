import Foundation
import HeraldCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// A Google service account, read from its JSON key file.
///
/// The private key is loaded into OpenSSL at once and its PEM text dropped; the account
/// prints without it.
public struct ServiceAccount: Sendable, CustomStringConvertible {
    public var clientEmail: String
    public var privateKeyID: String
    public var projectID: String
    /// Where token requests go. Google's libraries honour the file's `token_uri`, and so does
    /// Herald, so a local stand-in can take them.
    public var tokenURI: String
    public let key: CryptoKey

    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    public init(clientEmail: String, privateKeyID: String, projectID: String, tokenURI: String, key: CryptoKey) {
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.projectID = projectID
        self.tokenURI = tokenURI
        self.key = key
    }

    /// Reads a service-account JSON file, such as the one `GOOGLE_APPLICATION_CREDENTIALS` names.
    public static func load(file path: String) throws -> ServiceAccount {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError("cannot read the service-account file \(path)")
        }
        return try parse(data, source: path)
    }

    /// Parses service-account JSON; `source` names it in errors.
    public static func parse(_ data: Data, source: String) throws -> ServiceAccount {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ServiceAccountError("\(source) is not a JSON object")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw ServiceAccountError(
                    "\(source) has no \"\(name)\"; download the key file again from the Firebase console")
            }
            return value
        }
        if let type = object["type"] as? String, type != "service_account" {
            throw ServiceAccountError("\(source) is a \"\(type)\" credential, not a service account")
        }
        let key: CryptoKey
        do {
            key = try CryptoKey(privateKeyPEM: try field("private_key"))
        } catch let error as CryptoError {
            throw ServiceAccountError("the private_key in \(source) cannot be loaded (\(error.message))")
        }
        guard key.kind == .rsa else { throw ServiceAccountError("the private_key in \(source) is not an RSA key") }
        return ServiceAccount(
            clientEmail: try field("client_email"),
            privateKeyID: (object["private_key_id"] as? String) ?? "",
            projectID: try field("project_id"),
            tokenURI: (object["token_uri"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? defaultTokenURI,
            key: key)
    }

    /// Writes the account's key file, readable by its owner only from the moment it exists
    /// (it holds a private key). An existing file is replaced.
    public func writeFile(to path: String) throws {
        let contents = try fileContents()
        unlink(path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ServiceAccountError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        try handle.write(contentsOf: contents)
    }

    /// A service-account file's JSON, for test and demo accounts generated at run time.
    public func fileContents() throws -> Data {
        let object: [String: String] = [
            "type": "service_account",
            "project_id": projectID,
            "private_key_id": privateKeyID,
            "private_key": try key.privateKeyPEM(),
            "client_email": clientEmail,
            "token_uri": tokenURI,
        ]
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
    }

    /// A new account, for tests and the demo: with `key`, or a fresh 2048-bit one.
    public static func generate(projectID: String, tokenURI: String, key: CryptoKey? = nil) throws -> ServiceAccount {
        ServiceAccount(
            clientEmail: "herald@\(projectID).iam.gserviceaccount.com",
            privateKeyID: UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""),
            projectID: projectID, tokenURI: tokenURI, key: try key ?? CryptoKey.generateRSA())
    }

    public var description: String { "ServiceAccount(\(clientEmail), project \(projectID), key id \(privateKeyID))" }
}

/// A service-account file Herald cannot use, with what to do about it.
public struct ServiceAccountError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The JWT a service account trades for an OAuth access token.
extension JWT {
    /// The OAuth scope for FCM sends.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The audience Google's libraries put in a service account's assertion.
    public static let tokenAudience = "https://oauth2.googleapis.com/token"

    /// The assertion a service account trades for an access token (RFC 7523), valid for `lifetime`
    /// (at most an hour).
    public static func serviceAccountAssertion(
        for account: ServiceAccount, scope: String = messagingScope, issuedAt: Date, lifetime: TimeInterval = 3600
    ) throws -> String {
        let issued = Int(issuedAt.timeIntervalSince1970)
        return try signRS256(
            header: .object([
                ("alg", .string("RS256")), ("typ", .string("JWT")), ("kid", .string(account.privateKeyID)),
            ]),
            claims: .object([
                ("iss", .string(account.clientEmail)),
                ("scope", .string(scope)),
                ("aud", .string(tokenAudience)),
                ("iat", .int(issued)),
                ("exp", .int(issued + Int(min(lifetime, 3600)))),
            ]),
            key: account.key)
    }
}
