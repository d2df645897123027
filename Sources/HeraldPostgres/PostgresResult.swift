import CLibPQ

/// The rows a statement returned. Reading is cheap: values are decoded from libpq's
/// buffer on access, and the buffer is freed when the last reference goes.
public final class PostgresResult: @unchecked Sendable {
    // A PGresult is immutable once returned, so reading it from any thread is safe.
    private let result: OpaquePointer
    public let rowCount: Int
    public let columnCount: Int
    /// Rows inserted, updated or deleted, for statements that report it.
    public let affectedRows: Int
    /// Column indexes by name, read once, so that decoding by name costs a lookup per value.
    private let columnIndexes: [String: Int]

    init(_ result: OpaquePointer) {
        self.result = result
        self.rowCount = Int(PQntuples(result))
        self.columnCount = Int(PQnfields(result))
        self.affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
        var indexes: [String: Int] = [:]
        for column in 0..<columnCount {
            let name = String(cString: PQfname(result, Int32(column)))
            // The first of two equal names wins, as with PQfnumber.
            if indexes[name] == nil { indexes[name] = column }
        }
        columnIndexes = indexes
    }

    deinit { PQclear(result) }

    public var columnNames: [String] {
        (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
    }

    /// The index of a column by name.
    public func column(named name: String) throws -> Int {
        guard let index = columnIndexes[name] else {
            throw PostgresError(.usage, "the result has no column \"\(name)\"")
        }
        return index
    }

    func isNull(row: Int, column: Int) -> Bool {
        PQgetisnull(result, Int32(row), Int32(column)) == 1
    }

    func withText<T>(row: Int, column: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        let pointer = PQgetvalue(result, Int32(row), Int32(column))!
        return try pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            try body(UnsafeBufferPointer(start: $0, count: length))
        }
    }
}

extension PostgresResult: RandomAccessCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { rowCount }
    public subscript(position: Int) -> PostgresRow { PostgresRow(result: self, index: position) }
}

/// One row of a ``PostgresResult``.
public struct PostgresRow: Sendable {
    let result: PostgresResult
    public let index: Int

    /// The value of column `column`, decoded as `T`; throws on NULL (decode as `T?` to allow it).
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        try checkRow()
        guard column >= 0, column < result.columnCount else {
            throw PostgresError(.usage, "column \(column) is out of range (\(result.columnCount) columns)")
        }
        if result.isNull(row: index, column: column) {
            throw PostgresError(
                .decoding, "column \(column) (\(result.columnNames[column])) is NULL, expected \(T.self)")
        }
        return try result.withText(row: index, column: column) { try T.decode(postgresText: $0) }
    }

    /// The value of column `column`, or nil when it is NULL.
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T?.Type = T?.self) throws -> T? {
        try checkRow()
        guard column >= 0, column < result.columnCount else {
            throw PostgresError(.usage, "column \(column) is out of range (\(result.columnCount) columns)")
        }
        if result.isNull(row: index, column: column) { return nil }
        return try result.withText(row: index, column: column) { try T.decode(postgresText: $0) }
    }

    /// A row past the end would read as NULL from libpq; say what really happened instead.
    private func checkRow() throws {
        guard index >= 0, index < result.rowCount else {
            throw PostgresError(.usage, "row \(index) is out of range (the result has \(result.rowCount) rows)")
        }
    }

    /// The value of the named column, decoded as `T`.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        try decode(try result.column(named: name), as: T.self)
    }

    /// The value of the named column, or nil when it is NULL.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T?.Type = T?.self) throws -> T? {
        try decode(try result.column(named: name), as: T?.self)
    }
}
