import Foundation
import HeraldCrypto
import HeraldFCM
import Testing

@Suite struct Base64URLTests {
    @Test func matchesFoundationsBase64WithURLAlphabetAndNoPadding() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected, "length \(length)")
            #expect(Base64URL.decode(Substring(expected)) == bytes)
        }
    }
}
