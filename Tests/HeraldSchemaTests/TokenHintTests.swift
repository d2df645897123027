import HeraldPostgres
import HeraldTestSupport
import Testing

/// Logs and views show a token's hint, never the token: for a Web Push endpoint (as secret as a
/// token), the origin and 8 characters of its last segment (`herald.token_hint`, the one home of
/// the rule: the daemon logs the hints `herald.record_sends` returns).
@Suite struct TokenHintTests {
    @Test func hintsKeepTheTokenSecret() async throws {
        let db = try await TestDatabase.create().connect()
        let hints = try await db.query(
            "SELECT herald.token_hint($1), herald.token_hint($2)",
            ["dGhpcyBpcyBhbiBGQ00gdG9rZW4", "https://fcm.googleapis.com/fcm/send/dXp1c2VyLXN1YnNjcmlwdGlvbg"])[0]
        #expect(try hints.decode(0, as: String.self) == "dGhpcyBp…")
        #expect(try hints.decode(1, as: String.self) == "https://fcm.googleapis.com/…dXp1c2Vy…")
    }
}
