import Foundation

/// A Swift type that can be read from a column in PostgreSQL's text format.
public protocol PostgresDecodable: Sendable {
    /// Decodes the value from its text form; `text` is valid only during the call.
    static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Self
}

extension PostgresDecodable {
    static func failure(_ text: UnsafeBufferPointer<UInt8>) -> PostgresError {
        PostgresError(.decoding, "\"\(String(decoding: text.prefix(64), as: UTF8.self))\" is not a \(Self.self)")
    }
}

extension String: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> String {
        String(decoding: text, as: UTF8.self)
    }
}

extension Int64: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Int64 {
        var value: Int64 = 0
        var negative = false
        var index = 0
        if text.first == 45 {
            negative = true
            index = 1
        }
        guard index < text.count else { throw failure(text) }
        while index < text.count {
            let byte = text[index]
            guard byte >= 48 && byte <= 57 else { throw failure(text) }
            value = value &* 10 &+ Int64(byte - 48)
            index += 1
        }
        return negative ? -value : value
    }
}

extension Int: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Int {
        Int(try Int64.decode(postgresText: text))
    }
}

extension Int32: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Int32 {
        guard let value = Int32(exactly: try Int64.decode(postgresText: text)) else { throw failure(text) }
        return value
    }
}

extension Double: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Double {
        guard let value = Double(String(decoding: text, as: UTF8.self)) else { throw failure(text) }
        return value
    }
}

extension Bool: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Bool {
        switch text.first {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw failure(text)
        }
    }
}

extension Date: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Date {
        guard let date = PostgresTimestamp.parse(text) else { throw failure(text) }
        return date
    }
}

extension UUID: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> UUID {
        guard let uuid = UUID(uuidString: String(decoding: text, as: UTF8.self)) else { throw failure(text) }
        return uuid
    }
}

/// `bytea` arrives in hex form (`\x0a0b…`).
extension Data: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> Data {
        guard text.count >= 2, text[0] == 92, text[1] == 120, text.count % 2 == 0 else { throw failure(text) }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: return byte - 48
            case 97...102: return byte - 87
            case 65...70: return byte - 55
            default: return nil
            }
        }
        // Into an array first: appending to Data byte by byte goes through replaceSubrange each time.
        var bytes = [UInt8](repeating: 0, count: (text.count - 2) / 2)
        for index in bytes.indices {
            guard let high = nibble(text[2 + 2 * index]), let low = nibble(text[3 + 2 * index]) else {
                throw failure(text)
            }
            bytes[index] = high << 4 | low
        }
        return Data(bytes)
    }
}

/// One-dimensional arrays of text-decodable elements (`{a,"b c",NULL}`); NULL elements are not allowed.
extension Array: PostgresDecodable where Element: PostgresDecodable {
    public static func decode(postgresText text: UnsafeBufferPointer<UInt8>) throws -> [Element] {
        guard text.first == 123, text.last == 125 else { throw failure(text) }
        var elements: [Element] = []
        var current: [UInt8] = []
        var quoted = false
        var inQuotes = false
        var index = 1
        let end = text.count - 1
        func flush() throws {
            if !quoted && current.elementsEqual("NULL".utf8) {
                throw PostgresError(.decoding, "array element is NULL; decode as an array of optionals in SQL instead")
            }
            try current.withUnsafeBufferPointer { elements.append(try Element.decode(postgresText: $0)) }
            current.removeAll(keepingCapacity: true)
            quoted = false
        }
        if end == 1 { return [] }
        while index < end {
            let byte = text[index]
            if inQuotes {
                if byte == 92 {
                    index += 1
                    current.append(text[index])
                } else if byte == 34 {
                    inQuotes = false
                } else {
                    current.append(byte)
                }
            } else if byte == 34 {
                inQuotes = true
                quoted = true
            } else if byte == 44 {
                try flush()
            } else {
                current.append(byte)
            }
            index += 1
        }
        try flush()
        return elements
    }
}
