import Foundation

/// How one query parameter travels to the server.
public enum PostgresParameter: Sendable, Equatable {
    case null
    /// Text format: the server parses it as the parameter's type (cast it in SQL: `$1::bigint[]`).
    case text(String)
    /// Binary format, used for `bytea`.
    case binary([UInt8])
}

/// A Swift value that can be bound as a query parameter.
public protocol PostgresEncodable: Sendable {
    var postgresParameter: PostgresParameter { get }
}

/// A value that can stand inside a PostgreSQL array literal (`{1,2,3}`).
public protocol PostgresArrayElement: PostgresEncodable {
    /// The element's text inside an array literal, already quoted where needed; nil for NULL.
    var postgresArrayElementText: String? { get }
}

extension PostgresArrayElement {
    public var postgresArrayElementText: String? {
        guard case .text(let text) = postgresParameter else { return nil }
        return quoteArrayElement(text)
    }
}

extension String: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(self) }
}

extension Substring: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Int: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
    public var postgresArrayElementText: String? { String(self) }
}

extension Int64: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
    public var postgresArrayElementText: String? { String(self) }
}

extension Int32: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
    public var postgresArrayElementText: String? { String(self) }
}

extension Double: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
    public var postgresArrayElementText: String? { String(self) }
}

extension Bool: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(self ? "t" : "f") }
    public var postgresArrayElementText: String? { self ? "t" : "f" }
}

extension UUID: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(uuidString) }
    public var postgresArrayElementText: String? { uuidString }
}

extension Date: PostgresArrayElement {
    public var postgresParameter: PostgresParameter { .text(PostgresTimestamp.format(self)) }
    public var postgresArrayElementText: String? { "\"\(PostgresTimestamp.format(self))\"" }
}

/// `Data` binds as `bytea`, in binary format.
extension Data: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .binary([UInt8](self)) }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresParameter: PostgresParameter {
        switch self {
        case .none: return .null
        case .some(let value): return value.postgresParameter
        }
    }
}

extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public var postgresArrayElementText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.postgresArrayElementText
        }
    }
}

/// Arrays bind as a PostgreSQL array literal; cast the parameter in SQL (`$1::text[]`).
extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public var postgresParameter: PostgresParameter {
        var literal = "{"
        literal.reserveCapacity(count * 8 + 2)
        for (index, element) in enumerated() {
            if index > 0 { literal += "," }
            literal += element.postgresArrayElementText ?? "NULL"
        }
        literal += "}"
        return .text(literal)
    }
}

/// A value of a composite type (`CREATE TYPE … AS (…)`), bound inside an array of it
/// (`$1::herald.send_outcome[]`), so that SQL reads each field by name.
public protocol PostgresComposite: PostgresArrayElement {
    /// Writes its fields, in the type's order.
    func writeFields(to record: inout PostgresRecordWriter)
}

extension PostgresComposite {
    /// The record literal `("1","sent",)`: each field quoted, NULL left empty.
    public var postgresParameter: PostgresParameter { .text(literal(inArray: false)) }

    /// The record literal quoted as an array element, in one pass: each field's quotes and
    /// backslashes escaped for the record, and again for the array. This runs for every
    /// outcome of every batch.
    public var postgresArrayElementText: String? { literal(inArray: true) }

    func literal(inArray: Bool) -> String {
        var record = PostgresRecordWriter(inArray: inArray)
        writeFields(to: &record)
        return record.finish()
    }
}

/// Writes a record literal field by field (``PostgresComposite``). Binary fields (`bytea`) are
/// not supported.
public struct PostgresRecordWriter {
    private var bytes: [UInt8]
    private var fields = 0
    private let inArray: Bool

    init(inArray: Bool) {
        self.inArray = inArray
        bytes = []
        bytes.reserveCapacity(128)
        if inArray { bytes.append(UInt8(ascii: "\"")) }
        bytes.append(UInt8(ascii: "("))
    }

    /// The next field; nil is NULL.
    public mutating func append<Value: PostgresEncodable>(_ value: Value?) {
        if fields > 0 { bytes.append(UInt8(ascii: ",")) }
        fields += 1
        switch value?.postgresParameter {
        case nil, .null?: break
        case .text(let text)?:
            quote()
            for byte in text.utf8 {
                if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") {
                    // Escaped for the record (a backslash before it), and each of the two bytes
                    // escaped again for the array.
                    if inArray { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(UInt8(ascii: "\\"))
                    if inArray { bytes.append(UInt8(ascii: "\\")) }
                }
                bytes.append(byte)
            }
            quote()
        case .binary?: preconditionFailure("a composite's field cannot be bound in binary")
        }
    }

    /// The record's own quote around a field, escaped for the array.
    private mutating func quote() {
        if inArray { bytes.append(UInt8(ascii: "\\")) }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func finish() -> String {
        bytes.append(UInt8(ascii: ")"))
        if inArray { bytes.append(UInt8(ascii: "\"")) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A JSON document bound as text; cast it in SQL (`$1::jsonb`).
public struct PostgresJSON: PostgresEncodable, Equatable {
    public var text: String
    public init(_ text: String) { self.text = text }
    public init<T: Encodable>(encoding value: T) throws {
        self.text = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }
    public var postgresParameter: PostgresParameter { .text(text) }
}

/// Quotes an element for an array literal: always double-quoted, with `\` and `"` escaped.
/// Works on UTF-8 bytes: this runs for every id and token of every batch.
func quoteArrayElement(_ text: String) -> String {
    let backslash = UInt8(ascii: "\\")
    let quote = UInt8(ascii: "\"")
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count + 2)
    bytes.append(quote)
    for byte in text.utf8 {
        if byte == backslash || byte == quote { bytes.append(backslash) }
        bytes.append(byte)
    }
    bytes.append(quote)
    return String(decoding: bytes, as: UTF8.self)
}
