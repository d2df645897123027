import HeraldCore
import Testing

/// Logs show a token's hint, never the token: for a Web Push endpoint (as secret as a token),
/// the origin and 8 characters of its last segment, as `herald.token_hint` shows it.
@Suite struct TokenHintTests {
    @Test func hintsKeepTheTokenSecret() {
        #expect(tokenHint("dGhpcyBpcyBhbiBGQ00gdG9rZW4") == "dGhpcyBp…")
        #expect(
            tokenHint("https://fcm.googleapis.com/fcm/send/dXp1c2VyLXN1YnNjcmlwdGlvbg")
                == "https://fcm.googleapis.com/…dXp1c2Vy…")
    }
}
