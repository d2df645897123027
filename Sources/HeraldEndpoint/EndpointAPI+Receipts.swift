import Foundation
import HeraldCore
import HeraldPostgres
import Hummingbird
import Metrics
import NIOCore
import Synchronization

/// The providers' receipts (`POST /v1/receipts/{provider}/{app}`): the URL an app registers with
/// its provider (AppGallery Connect's receipt configuration, for Push Kit) or each message names
/// (Xiaomi's callback), each post checked with the app's callback credentials, or each receipt by
/// the delivery reference it echoes, and recorded by `herald.record_receipts`. The readers are the
/// settings' (``Endpoint/Settings/receiptReaders``): the daemon gives every provider's.
extension EndpointAPI {
    enum ReceiptSQL {
        static func credentials(_ table: String) -> String {
            "SELECT receipt_username, receipt_key_file FROM \(table) WHERE app_id = $1"
        }
        static let record = """
            SELECT outcome, seconds_after_commit
            FROM herald.record_receipts($1, $2, $3, $4::herald.provider_receipt[], $5)
            """
    }

    /// A receipt as `herald.provider_receipt` takes it.
    struct ReceiptRow: PostgresComposite {
        var receipt: ProviderReceipt

        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(receipt.deliveryID)
            record.append(receipt.token)
            record.append(receipt.messageID)
            record.append(receipt.delivered)
            record.append(receipt.meaning)
            record.append(receipt.at.timeIntervalSince1970)
            record.append(receipt.effect.rawValue)
            record.append(receipt.reference)
        }
    }

    func receipts(_ request: Request, provider: String, app: String) async -> Response {
        guard let reader = settings.receiptReaders.first(where: { $0.provider == provider }) else {
            return Self.json(
                .notFound,
                [
                    "message":
                        "no provider named \(provider.prefix(40)) posts receipts here; these do: "
                        + settings.receiptReaders.map(\.provider).sorted().joined(separator: ", ")
                ])
        }
        // Counted by provider and why, never by the app the URL names: anyone may post any name.
        func refused(_ status: HTTPResponse.Status, _ why: String, _ refusal: ReceiptRefusal) -> Response {
            Counter(label: "herald_receipts_refused_total", dimensions: [("provider", provider), ("reason", why)])
                .increment()
            return Self.rawJSON(status, reader.refusedAnswer(refusal))
        }
        if let refusal = Self.controlCharacterRefusal([("app", app)]) {
            return refused(.badRequest, "malformed", ReceiptRefusal(.malformed, refusal))
        }
        var nonce: String?
        if reader.signsPosts {
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            // Before the database is asked anything: a post that cannot be signed right costs nothing.
            if let refusal = reader.screen(headers: headers, now: settings.clock.now()) {
                return refused(.unauthorized, "unauthenticated", refusal)
            }
            let credentials: ReceiptCredentials
            switch await receiptCredentials(reader, app: app) {
            case .success(let found?): credentials = found
            case .success(nil):
                return refused(
                    .forbidden, "not_set_up",
                    ReceiptRefusal(
                        .unauthenticated,
                        "app \(app.prefix(100)) takes no \(provider) receipts: set receipt_username and"
                            + " receipt_key_file in \(reader.settingsTable) to the callback user name and key of its"
                            + " receipt configuration"))
            case .failure(let refusal): return refusal.response
            }
            switch reader.authenticate(headers: headers, credentials: credentials, now: settings.clock.now()) {
            case .success(let checked): nonce = checked
            case .failure(let refusal): return refused(.unauthorized, "unauthenticated", refusal)
            }
        }
        let body: ByteBuffer
        switch await readBody(request, limit: settings.maxReceiptBytes) {
        case .success(let bytes): body = bytes
        case .failure(let refusal):
            Counter(label: "herald_receipts_refused_total", dimensions: [("provider", provider), ("reason", "body")])
                .increment()
            return refusal.response
        }
        let read: (receipts: [ProviderReceipt], unreadable: Int)
        switch reader.receipts(in: Array(buffer: body)) {
        case .success(let receipts): read = receipts
        case .failure(let refusal): return refused(.badRequest, "malformed", refusal)
        }
        do {
            let rows = try await connection.query(
                ReceiptSQL.record,
                [provider, app, nonce, read.receipts.map(ReceiptRow.init), settings.clock.now()])
            let outcomes = try rows.map {
                (outcome: try $0.decode(0, as: String.self), delay: try $0.decode(1, as: Double?.self))
            }
            if outcomes.contains(where: { $0.outcome == "replayed" }) {
                return refused(
                    .unauthorized, "replayed",
                    ReceiptRefusal(.unauthenticated, "this signature was taken before: a signed post is taken once")
                )
            }
            var counts = Dictionary(outcomes.map { ($0.outcome, 1) }, uniquingKeysWith: +)
            if read.unreadable > 0 { counts["unreadable", default: 0] += read.unreadable }
            // The app is named once it is known to be one: its credentials signed the post, or a
            // receipt matched one of its deliveries. A name anyone may post goes uncounted by name.
            let matched = ["delivered", "not_delivered", "known", "busy"]
            let known = reader.signsPosts || outcomes.contains { matched.contains($0.outcome) }
            for (outcome, count) in counts {
                Counter(
                    label: "herald_receipts_total",
                    dimensions: [("provider", provider), ("app", known ? app : "-"), ("outcome", outcome)]
                ).increment(by: count)
            }
            let delays = Timer(label: "herald_receipt_delay_seconds", dimensions: [("provider", provider)])
            for outcome in outcomes where ["delivered", "not_delivered"].contains(outcome.outcome) {
                guard let seconds = outcome.delay, seconds >= 0 else { continue }
                delays.recordNanoseconds(Int64(min(seconds, 1e9) * 1e9))
            }
            return Self.rawJSON(.ok, reader.acceptedAnswer)
        } catch {
            let (status, message) = failure(error, route: "receipts")
            return Self.rawJSON(status, reader.refusedAnswer(ReceiptRefusal(.malformed, message)))
        }
    }

    /// The app's receipt credentials, its key read from its file (kept for a minute, so a key
    /// changed in its file is taken within one); nil when the app has none set.
    func receiptCredentials(_ reader: any ReceiptReader, app: String) async -> Result<
        ReceiptCredentials?, Refusal
    > {
        let row: PostgresRow
        do {
            guard let found = try await connection.query(ReceiptSQL.credentials(reader.settingsTable), [app]).first
            else { return .success(nil) }
            row = found
        } catch {
            let (status, message) = failure(error, route: "receipts")
            return .failure(Refusal(response: Self.json(status, ["message": message])))
        }
        guard let username = try? row.decode(0, as: String?.self), let path = try? row.decode(1, as: String?.self)
        else { return .success(nil) }
        let now = ContinuousClock.now
        if let cached = receiptKeys.withLock({ $0[path] }), now - cached.readAt < .seconds(60) {
            return .success(ReceiptCredentials(username: username, key: cached.key))
        }
        guard let key = FileManager.default.contents(atPath: path), !key.isEmpty else {
            logger.error(
                "the receipt key file cannot be read",
                metadata: ["app": "\(app)", "provider": "\(reader.provider)", "file": "\(path)"])
            return .failure(
                Refusal(
                    response: Self.json(
                        .internalServerError, ["message": "Herald cannot read this app's receipt key; its log says why"]
                    )
                ))
        }
        receiptKeys.withLock { $0[path] = ([UInt8](key), now) }
        return .success(ReceiptCredentials(username: username, key: [UInt8](key)))
    }

    static func rawJSON(_ status: HTTPResponse.Status, _ json: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: json)))
    }
}
