import HeraldCrypto
import HeraldWebPush
import Testing

/// RFC 8291's worked example (section 5 and Appendix A): fixed keys and salt, so every
/// intermediate value and the body are known byte for byte.
@Suite struct WebPushEncryptionTests {
    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(Substring(text))! }

    let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    let senderPrivate = bytes("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")
    let senderPublic = bytes(
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8")
    let receiverPrivate = bytes("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")
    let receiverPublic = bytes(
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4")
    let auth = bytes("BTBZMqHH6r4Tts7J_aSIgg")
    let salt = bytes("DGv6ra1nlYgDCS1FRnbzlw")
    let body = bytes(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    )

    func subscription() throws -> WebPushSubscription {
        try WebPushSubscription(
            endpoint: "https://push.example.net/push/JzLQ3raZJfFBR0aqvOMsLrt54w4rJUsV", p256dh: receiverPublic,
            auth: auth)
    }

    @Test func everyIntermediateValueMatchesTheRFC() throws {
        let sender = try CryptoKey(p256PublicPoint: senderPublic, privateScalar: senderPrivate)
        #expect(try sender.publicPoint() == senderPublic)
        let ecdh = try sender.sharedSecret(with: try CryptoKey(p256PublicPoint: receiverPublic))
        #expect(ecdh == Self.bytes("kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"))
        let keys = try WebPushEncryption.deriveKeys(
            sharedSecret: ecdh, auth: auth, receiverPublic: receiverPublic, senderPublic: senderPublic, salt: salt)
        #expect(keys.inputKeyMaterial == Self.bytes("S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"))
        #expect(keys.contentEncryptionKey == Self.bytes("oIhVW04MRdy2XN9CiKLxTg"))
        #expect(keys.nonce == Self.bytes("4h_95klXJ5E_qnoN"))
        // HKDF's extract step alone (PRK_key in the RFC), for the primitive itself.
        let extracted = HMAC.sha256(key: auth, ecdh)
        #expect(extracted == Self.bytes("Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k"))
    }

    @Test func theBodyIsTheRFCsByteForByte() throws {
        let encrypted = try WebPushEncryption.encrypt(
            plaintext, for: try subscription(), senderScalar: senderPrivate, salt: salt)
        #expect(encrypted == body)
    }

    @Test func theBrowsersSideReadsTheRFCsBody() throws {
        let receiver = try CryptoKey(p256PublicPoint: receiverPublic, privateScalar: receiverPrivate)
        #expect(try WebPushEncryption.decrypt(body, receiverKey: receiver, auth: auth) == plaintext)
        // One changed byte of ciphertext, or the wrong secret, and the tag does not match.
        var altered = body
        altered[100] ^= 1
        #expect(throws: (any Error).self) { try WebPushEncryption.decrypt(altered, receiverKey: receiver, auth: auth) }
        #expect(throws: (any Error).self) {
            try WebPushEncryption.decrypt(body, receiverKey: receiver, auth: Array(repeating: 0, count: 16))
        }
    }

    @Test func freshKeysAndSaltEachMessage() throws {
        let browser = try CryptoKey.generateP256()
        let secret = (0..<16).map { UInt8($0) }
        let target = try WebPushSubscription(
            endpoint: "https://push.example.net/push/1", p256dh: try browser.publicPoint(), auth: secret)
        let message = Array(#"{"title":"Hi ✓"}"#.utf8)
        let first = try WebPushEncryption.encrypt(message, for: target)
        let second = try WebPushEncryption.encrypt(message, for: target)
        #expect(first != second)
        #expect(first[0..<16] != second[0..<16], "a new salt")
        #expect(first[21..<86] != second[21..<86], "a new sender key")
        #expect(try WebPushEncryption.decrypt(first, receiverKey: browser, auth: secret) == message)
        #expect(try WebPushEncryption.decrypt(second, receiverKey: browser, auth: secret) == message)
    }

    @Test func theLargestPayloadFillsExactly4096Bytes() throws {
        let browser = try CryptoKey.generateP256()
        let target = try WebPushSubscription(
            endpoint: "https://push.example.net/push/1", p256dh: try browser.publicPoint(),
            auth: Array(repeating: 7, count: 16))
        let largest = [UInt8](repeating: 0x61, count: WebPushEncryption.maxPlaintextBytes)
        #expect(try WebPushEncryption.encrypt(largest, for: target).count == 4096)
        #expect(throws: WebPushError.self) { try WebPushEncryption.encrypt(largest + [0x61], for: target) }
    }

    @Test func subscriptionsAreChecked() throws {
        #expect(throws: WebPushError.self) {
            try WebPushSubscription(endpoint: "http://push.example.net/x", p256dh: receiverPublic, auth: auth)
        }
        #expect(throws: WebPushError.self) {
            try WebPushSubscription(
                endpoint: "https://push.example.net/x", p256dh: Array(receiverPublic.dropLast()), auth: auth)
        }
        #expect(throws: WebPushError.self) {
            try WebPushSubscription(endpoint: "https://push.example.net/x", p256dh: receiverPublic, auth: [1, 2])
        }
        // A point that is not on the curve is refused before any ECDH.
        var offCurve = receiverPublic
        offCurve[64] ^= 1
        #expect(throws: (any Error).self) { try CryptoKey(p256PublicPoint: offCurve) }
        #expect(try subscription().origin == "https://push.example.net")
    }

    /// RFC 8291 §7: a key that is not a point on the curve could leak the sender's private key;
    /// the encryption refuses it, however it is wrong, and says whose fault it is.
    @Test func aBrowserKeyOffTheCurveIsRefused() throws {
        var offCurve = receiverPublic
        offCurve[64] ^= 1
        let fieldPrime =
            Array(repeating: UInt8(0xFF), count: 4) + [0, 0, 0, 1] + Array(repeating: 0, count: 12)
            + Array(repeating: 0xFF, count: 12)
        for key in [offCurve, [4] + Array(repeating: 0, count: 64), [4] + fieldPrime + Array(receiverPublic[33...])] {
            let target = try WebPushSubscription(endpoint: "https://push.example.net/push/1", p256dh: key, auth: auth)
            #expect(throws: WebPushCipher.InvalidBrowserKey.self) {
                try WebPushEncryption.encrypt(plaintext, for: target)
            }
        }
    }
}
