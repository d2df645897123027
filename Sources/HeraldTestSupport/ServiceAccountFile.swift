import Foundation
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
