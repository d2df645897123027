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

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        lhs.encoded == rhs.encoded
    }

    /// The value as compact JSON text.
    public var encoded: String {
        var writer = JSONWriter()
        writer.write(self)
        return writer.text
    }
}

/// Appends compact JSON to a string; escapes per RFC 8259.
struct JSONWriter {
    var text = ""

    init(capacity: Int = 512) { text.reserveCapacity(capacity) }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .string(let string): writeString(string)
        case .int(let number): text += String(number)
        case .double(let number): text += number.isFinite ? "\(number)" : "null"
        case .bool(let flag): text += flag ? "true" : "false"
        case .null: text += "null"
        case .array(let elements):
            text += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { text += "," }
                write(element)
            }
            text += "]"
        case .object(let members):
            text += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { text += "," }
                writeString(member.0)
                text += ":"
                write(member.1)
            }
            text += "}"
        }
    }

    mutating func writeString(_ string: String) {
        text += "\""
        var start = string.unicodeScalars.startIndex
        let scalars = string.unicodeScalars
        var index = start
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let escape: String?
            switch scalar {
            case "\"": escape = "\\\""
            case "\\": escape = "\\\\"
            case "\n": escape = "\\n"
            case "\r": escape = "\\r"
            case "\t": escape = "\\t"
            case _ where scalar.value < 0x20:
                escape =
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: escape = nil
            }
            if let escape {
                text.unicodeScalars.append(contentsOf: scalars[start..<index])
                text += escape
                start = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        text.unicodeScalars.append(contentsOf: scalars[start..<scalars.endIndex])
        text += "\""
    }
}
