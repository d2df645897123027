import HeraldCrypto
import Testing

/// The digests providers sign with, against their published test vectors (FIPS 180-2's for
/// SHA-256, RFC 1321's for MD5).
@Suite struct DigestTests {
    @Test func sha256AndMD5MatchTheirTestVectors() {
        #expect(
            Digest.hex(Digest.sha256(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Digest.hex(Digest.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest.hex(Digest.md5(Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Digest.hex(Digest.md5(Array("message digest".utf8))) == "f96b697d7cb7938d525a2f31aaf161d0")
    }
}
