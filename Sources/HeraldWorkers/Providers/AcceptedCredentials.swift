import Foundation
import HeraldCore
import HeraldPostgres
import Synchronization

/// An app's credentials at a provider, and whether the provider has accepted a send made with
/// them, as every daemon knows it (`herald.accepted_credentials`). Some providers answer a token
/// of another app's credentials as they answer a dead token (Huawei's 80300007): such an answer
/// proves the token dead only once the credentials are known to be the app's, and a daemon that
/// has just started must not take the send it makes for the first one ever accepted.
struct AcceptedCredentials: Sendable {
    var app: String
    var provider: String
    /// The credentials as the provider names them (Huawei's client id).
    var account: String

    /// Whether this daemon has seen the provider accept a send with them, for a client that
    /// keeps no memory of its own (Huawei's does): shared by the app's routes in this daemon.
    final class SeenHere: Sendable {
        private let seen = Mutex(false)
        var value: Bool { seen.withLock { $0 } }
        func note() { seen.withLock { $0 = true } }
    }

    /// A dead token's answer (`answered`, in the provider's words) met before any send with the
    /// credentials was accepted: they may be another app's, so it is the app's configuration
    /// (`scope`, `check` naming its settings), and no phone is disabled for it.
    static func unproven(_ answered: String, check: String, scope: ConfigurationScope) -> PushOutcome {
        .configurationError(
            reason: "\(answered), and no send with these credentials has been accepted yet: are \(check) this app's?",
            scope: scope)
    }

    enum SQL {
        /// Whether provider $2 has accepted a send of app $1 with account $3.
        static let read = """
            SELECT EXISTS (
                SELECT FROM herald.accepted_credentials WHERE app_id = $1 AND provider = $2 AND account = $3)
            """
        /// Provider $2 accepted a send of app $1 with account $3 at $4: kept once.
        static let keep = """
            INSERT INTO herald.accepted_credentials (app_id, provider, account, first_accepted_at)
            VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
            """
    }

    /// ``remembered(context:accepted:noteAccepted:send:)`` for a client that keeps no memory of
    /// its own: this daemon's is `seen`, noted once one of the answers `send` returns `isAccepted`.
    func remembered<Answer>(
        seen: SeenHere, context: WorkerContext, send: () async -> [Answer], isAccepted: (Answer) -> Bool
    ) async -> [Answer] {
        await remembered(context: context, accepted: { seen.value }, noteAccepted: seen.note) {
            let answers = await send()
            if answers.contains(where: isAccepted) { seen.note() }
            return answers
        }
    }

    /// Runs `send` with a client's memory of these credentials (`accepted`, `noteAccepted`) made
    /// good by every daemon's: read while this daemon has not seen them accepted, and kept once
    /// it has. If the database cannot say, the memory is this daemon's alone.
    func remembered<Result>(
        context: WorkerContext, accepted: () -> Bool, noteAccepted: () -> Void, send: () async -> Result
    ) async -> Result {
        guard !accepted() else { return await send() }
        do {
            if try await context.connection.query(SQL.read, [app, provider, account])[0].decode(0, as: Bool.self) {
                noteAccepted()
                return await send()
            }
        } catch {
            context.logger.warning(
                "could not read whether a provider accepted the app's credentials before",
                metadata: ["app": "\(app)", "provider": "\(provider)", "error": "\(error)"])
        }
        let result = await send()
        guard accepted() else { return result }
        do {
            try await context.connection.query(SQL.keep, [app, provider, account, context.clock.now()])
        } catch {
            context.logger.warning(
                "could not keep that a provider accepted the app's credentials",
                metadata: ["app": "\(app)", "provider": "\(provider)", "error": "\(error)"])
        }
        return result
    }
}
