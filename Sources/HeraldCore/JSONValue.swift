/// A JSON value with object keys kept in order, for payloads Herald builds (APNs payloads carry
/// arbitrary custom keys) and encodes itself, quickly and deterministically.
public indirect enum JSONValue: Sendable, Equatable {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])
    /// JSON text PostgreSQL wrote (a `jsonb` value as text), valid by construction: written as
    /// it is, not parsed and encoded again.
    case raw(String)

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        lhs.encoded == rhs.encoded
    }

    /// The value as compact JSON text.
    public var encoded: String { String(decoding: encodedBytes, as: UTF8.self) }

    /// The value as compact JSON, UTF-8 bytes: a request body as it goes out.
    public var encodedBytes: [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.bytes
    }
}

/// Appends compact JSON as UTF-8 bytes; escapes per RFC 8259. Works on bytes, not
/// characters: it is on the send path for every message.
struct JSONWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .string(let string): writeString(string)
        case .int(let number): bytes.append(contentsOf: String(number).utf8)
        case .double(let number): bytes.append(contentsOf: (number.isFinite ? "\(number)" : "null").utf8)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .null: bytes.append(contentsOf: "null".utf8)
        case .raw(let json): bytes.append(contentsOf: json.utf8)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(member.0)
                bytes.append(UInt8(ascii: ":"))
                write(member.1)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    mutating func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Most strings need no escaping: copy them whole.
            guard utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
                case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case ..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [
                        0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                    ])
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
