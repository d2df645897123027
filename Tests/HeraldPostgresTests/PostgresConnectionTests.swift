import Foundation
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct PostgresConnectionTests {
    /// No statement of Herald's is long enough to repay JIT compilation, and a plan whose
    /// estimates crossed its thresholds compiled anew at every call (a claim of 500 spent 9 s in
    /// JIT). Debian's PostgreSQL ships with JIT on; every session turns it off.
    @Test func sessionsNeverCompileTheirStatements() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        #expect(try await connection.query("SHOW jit")[0].decode(0, as: String.self) == "off")
        // Estimated at a billion rows (a series whose end is not a constant is guessed at a
        // thousand), far past jit_above_cost: compiled whenever JIT is on.
        let plan = try await connection.query(
            """
            EXPLAIN (ANALYZE, TIMING OFF)
            SELECT count(*) FROM generate_series(1, 10 + (random() * 0)::int) a,
                                 generate_series(1, 10 + (random() * 0)::int) b,
                                 generate_series(1, 10 + (random() * 0)::int) c
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(!plan.contains { $0.contains("JIT") }, "\(plan.joined(separator: "\n"))")
    }

    /// A newer release's migration may make a function again with more columns; a statement
    /// prepared over it before then is prepared again and returns them (columns are read by
    /// name). In a transaction, which the refusal aborted, the call fails, and the next is
    /// prepared again.
    @Test func aStatementWhoseFunctionGainedColumnsIsPreparedAgain() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let connection = try await database.connect()
        let other = try await database.connect()
        func make(_ columns: [String]) async throws {
            try await other.execute(
                "DROP FUNCTION IF EXISTS shape(); CREATE FUNCTION shape() RETURNS TABLE ("
                    + columns.map { "\($0) int" }.joined(separator: ", ") + ") LANGUAGE sql AS 'SELECT "
                    + columns.indices.map { "\($0 + 1)" }.joined(separator: ", ") + "'")
        }
        try await make(["a"])
        let statement = "SELECT * FROM shape() WHERE $1::int IS NOT NULL"
        #expect(try await connection.query(statement, [1]).columnNames == ["a"])
        try await make(["a", "b"])
        let grown = try await connection.query(statement, [1])
        #expect(grown.columnNames == ["a", "b"])
        #expect(try grown[0].decode("b", as: Int.self) == 2)
        // The server keeps the statement as prepared again, not the old one beside it.
        let held = try await connection.query(
            "SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, 'shape' || '()') > 0")
        #expect(try held[0].decode(0, as: Int.self) == 1)

        try await make(["a", "b", "c"])
        await #expect(throws: PostgresError.self) {
            try await connection.withSession { session in
                try session.execute("BEGIN")
                defer { try? session.execute("ROLLBACK") }
                return try session.query(statement, [1]).columnNames
            }
        }
        #expect(try await connection.query(statement, [1]).columnNames == ["a", "b", "c"])
    }

    @Test func textWithQuotesAndUnicodeRoundTrips() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let connection = try await database.connect()
        let samples = [
            "plain", "it's \"quoted\" \\ back\\slash", "'; DROP TABLE x; --", "emoji 🚀👩‍👩‍👧", "עברית مرحبا",
            "", "tab\tnew\nline",
        ]
        for sample in samples {
            let echoed = try await connection.query("SELECT $1::text", [sample])[0].decode(0, as: String.self)
            #expect(echoed == sample)
        }
    }

    @Test func numbersBooleansAndDatesRoundTrip() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let date = Date(timeIntervalSince1970: 1_763_780_749.123456)
        let row = try await connection.query(
            "SELECT $1::bigint, $2::int, $3::float8, $4::bool, $5::timestamptz, $6::bool",
            [Int64.max, Int32.min, 3.25, true, date, false])[0]
        #expect(try row.decode(0, as: Int64.self) == Int64.max)
        #expect(try row.decode(1, as: Int32.self) == Int32.min)
        #expect(try row.decode(2, as: Double.self) == 3.25)
        #expect(try row.decode(3, as: Bool.self) == true)
        #expect(abs(try row.decode(4, as: Date.self).timeIntervalSince(date)) < 0.000_001)
        #expect(try row.decode(5, as: Bool.self) == false)
    }

    /// Epoch seconds as PostgreSQL counts them, to the precision a Date (a Double) has there.
    static func sameInstant(_ date: Date, _ epoch: Double) -> Bool {
        abs(date.timeIntervalSince1970 - epoch) <= max(0.000_001, abs(epoch) * 1e-15)
    }

    /// Every form PostgreSQL prints in Herald's session style (ISO, UTC) decodes to the instant
    /// the server itself says, out to the ends of its range.
    @Test(arguments: [
        ("10000-01-01", "10000-01-01 00:00:00+00"),
        ("294276-12-31 23:59:59.999999+00", "294276-12-31 23:59:59.999999+00"),
        ("123456-07-08 09:10:11.5+00", "123456-07-08 09:10:11.5+00"),
        ("4713-01-01 BC", "4713-01-01 00:00:00+00 BC"),
        ("4714-11-24 00:00:00+00 BC", "4714-11-24 00:00:00+00 BC"),
        ("0044-03-15 12:00:00+00 BC", "0044-03-15 12:00:00+00 BC"),
        ("0001-12-31 23:59:59.5 BC", "0001-12-31 23:59:59.5+00 BC"),
        ("0001-01-01", "0001-01-01 00:00:00+00"),
        ("1969-12-31 23:59:59.999999", "1969-12-31 23:59:59.999999+00"),
        ("9999-12-31 23:59:59.123456", "9999-12-31 23:59:59.123456+00"),
        ("2000-02-29 12:00:00+14", "2000-02-28 22:00:00+00"),
    ])
    func timestampsDecodeAsPostgreSQLPrintsThem(input: String, printed: String) async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let row = try await connection.query(
            "SELECT $1::timestamptz, $1::timestamptz::text, extract(epoch FROM $1::timestamptz)::float8", [input])[0]
        #expect(try row.decode(1, as: String.self) == printed)
        let date = try row.decode(0, as: Date.self)
        let epoch = try row.decode(2, as: Double.self)
        #expect(Self.sameInstant(date, epoch), "\(printed): \(date.timeIntervalSince1970) is not \(epoch)")
    }

    /// A session in another time zone prints local mean time before standard time, whose
    /// offsets have seconds; they decode too (Herald's sessions are UTC, but nothing relies on it).
    @Test func offsetsWithSecondsDecode() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        for (zone, instant, printed) in [
            ("Europe/Amsterdam", "1900-01-01 00:00:00+00", "1900-01-01 00:19:32+00:19:32"),
            ("America/New_York", "1800-01-01 00:00:00+00", "1799-12-31 19:03:58-04:56:02"),
            ("Europe/Amsterdam", "0044-03-15 12:00:00+00 BC", "0044-03-15 12:19:32+00:19:32 BC"),
        ] {
            let row = try await connection.withSession { session in
                try session.execute("SET TimeZone = '\(zone)'")
                defer { try? session.execute("SET TimeZone = 'UTC'") }
                return try session.query(
                    "SELECT $1::timestamptz, $1::timestamptz::text, extract(epoch FROM $1::timestamptz)::float8",
                    [instant])[0]
            }
            #expect(try row.decode(1, as: String.self) == printed)
            #expect(
                Self.sameInstant(try row.decode(0, as: Date.self), try row.decode(2, as: Double.self)), "\(printed)")
        }
    }

    /// Text that is not a timestamp is refused, not read as some other instant.
    @Test func malformedTimestampsAreRefused() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        for text in [
            "", "2026", "123-01-01 00:00:00+00", "2026-13-01 00:00:00+00", "2026-01-32 00:00:00+00",
            "2026-01-01 24:00:00+00", "2026-01-01 00:00:00+00 AD", "2026-01-01 00:00:00+00 BCE",
            "2026-01-01 00:00:00.+00", "2026-01-01 00:00:00+0", "0000-01-01 00:00:00+00",
            "9999999999-01-01 00:00:00+00", "2026-01-01T00:00:00Z",
        ] {
            let row = try await connection.query("SELECT $1::text", [text])[0]
            #expect(throws: PostgresError.self, "\(text)") { try row.decode(0, as: Date.self) }
        }
    }

    /// A Date beyond year 9999 or before 1 AD binds as text PostgreSQL reads back as the same instant.
    @Test(arguments: [
        "10000-01-01 00:00:00+00", "294276-12-31 23:59:59+00", "0044-03-15 12:00:00+00 BC",
        "4713-01-01 00:00:00+00 BC", "0001-12-31 23:59:59.5+00 BC", "1969-12-31 23:59:59.999999+00",
        "2026-11-22 03:05:49.123456+00",
    ])
    func extremeDatesRoundTrip(printed: String) async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        // The instant from the server's own count, not from the decoder under test.
        let epoch = try await connection.query("SELECT extract(epoch FROM $1::timestamptz)::float8", [printed])[0]
            .decode(0, as: Double.self)
        let date = Date(timeIntervalSince1970: epoch)
        let row = try await connection.query(
            """
            SELECT $1::timestamptz::text, extract(epoch FROM $1::timestamptz)::float8, $1::timestamptz,
                   $2::timestamptz[]
            """, [date, [date, date]])[0]
        #expect(try row.decode(0, as: String.self) == printed)
        #expect(Self.sameInstant(date, try row.decode(1, as: Double.self)))
        #expect(Self.sameInstant(try row.decode(2, as: Date.self), epoch))
        let array = try row.decode(3, as: [Date].self)
        #expect(array.count == 2 && array.allSatisfy { Self.sameInstant($0, epoch) })
    }

    /// A Date bound as a timestamp and the same Date sent as epoch seconds (composites carry times
    /// that way, read with `to_timestamp`) are the same microsecond, even within a hair of a half
    /// one: a delivery told to wait until a time is due at that time. Where the two rounded apart,
    /// a claim at exactly a delivery's `run_at` found it a microsecond early.
    @Test func aDateIsTheSameMicrosecondAsTimestampAndAsEpochSeconds() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        var generator = SystemRandomNumberGenerator()
        let dates =
            (0..<20_000).map { index -> Date in
                // Whole microseconds and a half, with the Double's own error either side of it.
                let micros = Double(Int64.random(in: 1_700_000_000_000_000...1_900_000_000_000_000, using: &generator))
                let half = index.isMultiple(of: 2) ? 0.5 : Double.random(in: 0..<1, using: &generator)
                return Date(timeIntervalSince1970: (micros + half) / 1_000_000)
            } + [Date(timeIntervalSince1970: -1.0000005), Date(timeIntervalSince1970: 0.0000005)]
        let apart = try await connection.query(
            """
            SELECT count(*) FILTER (WHERE to_timestamp(u.epoch) <> u.at),
                   min(to_timestamp(u.epoch)::text || ' <> ' || u.at::text) FILTER (WHERE to_timestamp(u.epoch) <> u.at)
            FROM unnest($1::float8[], $2::timestamptz[]) AS u(epoch, at)
            """, [dates.map(\.timeIntervalSince1970), dates])[0]
        let example = try apart.decode(1, as: String?.self) ?? ""
        #expect(try apart.decode(0, as: Int64.self) == 0, "\(example)")
    }

    /// A NUL would end a C string early: the value is refused, naming the parameter, before
    /// anything reaches the server; arrays of strings too.
    @Test func textHoldingNULIsRefusedNotTruncated() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        try await connection.execute("CREATE TABLE t (id text)")
        let scalar = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t VALUES ($1), ($2)", ["fine", "device\u{0}-1"])
        }
        #expect(scalar?.kind == .usage)
        #expect(scalar?.sqlStateClass == "22")
        #expect(scalar?.message.contains("parameter $2") == true, "\(String(describing: scalar))")
        #expect(scalar?.message.contains("NUL") == true)
        let array = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t SELECT unnest($1::text[])", [["a", "b\u{0}c"]])
        }
        #expect(array?.message.contains("parameter $1") == true, "\(String(describing: array))")
        // Nothing was stored, truncated or otherwise, and the connection still works.
        #expect(try await connection.query("SELECT count(*) FROM t")[0].decode(0, as: Int.self) == 0)
        #expect(try await connection.query("SELECT $1::text", ["ok"])[0].decode(0, as: String.self) == "ok")
    }

    @Test func byteaRoundTripsInBinary() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let bytes = Data([0, 1, 2, 255, 0, 92, 39, 34])
        let row = try await connection.query("SELECT $1::bytea, length($1::bytea)", [bytes])[0]
        #expect(try row.decode(0, as: Data.self) == bytes)
        #expect(try row.decode(1, as: Int.self) == bytes.count)
    }

    @Test func jsonRoundTrips() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let json = PostgresJSON(#"{"title": "Hi \"there\"", "n": 3, "list": [1, "two"], "emoji": "🎉"}"#)
        let row = try await connection.query(
            "SELECT $1::jsonb ->> 'title', ($1::jsonb -> 'list' ->> 1), $1::jsonb ->> 'emoji'", [json])[0]
        #expect(try row.decode(0, as: String.self) == #"Hi "there""#)
        #expect(try row.decode(1, as: String.self) == "two")
        #expect(try row.decode(2, as: String.self) == "🎉")
    }

    @Test func arraysRoundTrip() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let texts = ["a", "b c", "quote\"d", "back\\slash", "comma,here", "{brace}", "NULL", "", "emoji 🚀 \\\"ü\\\""]
        let row = try await connection.query(
            "SELECT $1::text[], $2::bigint[], cardinality($1::text[]), $3::bigint[]",
            [texts, [Int64(1), -2, 3], [Int64]()])[0]
        #expect(try row.decode(0, as: [String].self) == texts)
        #expect(try row.decode(1, as: [Int64].self) == [1, -2, 3])
        #expect(try row.decode(2, as: Int.self) == texts.count)
        #expect(try row.decode(3, as: [Int64].self) == [])
    }

    struct Pair: PostgresComposite {
        var number: Int64?
        var text: String?
        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(number)
            record.append(text)
        }
    }

    /// Each field reaches SQL as it was, whatever it holds: quotes, backslashes, commas and
    /// parentheses at both levels of quoting (the array's and the record's), the empty string
    /// apart from NULL.
    @Test func compositesRoundTripFieldByField() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        try await connection.execute("CREATE TYPE pair AS (number bigint, text text)")
        let texts = ["a", "quote\"d", "back\\slash", "comma,here", "(paren)", "{brace}", "NULL", "", "🚀 \\\"ü"]
        var pairs = texts.enumerated().map { Pair(number: Int64($0.offset) - 3, text: $0.element) }
        pairs.append(Pair(number: nil, text: nil))
        let rows = try await connection.query(
            "SELECT p.number, p.text, p.text IS NULL FROM unnest($1::pair[]) WITH ORDINALITY AS p ORDER BY ordinality",
            [pairs])
        #expect(rows.count == pairs.count)
        for (row, pair) in zip(rows, pairs) {
            #expect(try row.decode(0, as: Int64?.self) == pair.number)
            #expect(try row.decode(1, as: String?.self) == pair.text)
            #expect(try row.decode(2, as: Bool.self) == (pair.text == nil))
        }
        // One alone, outside an array.
        for pair in pairs {
            let row = try await connection.query("SELECT ($1::pair).number, ($1::pair).text", [pair])[0]
            #expect(try row.decode(0, as: Int64?.self) == pair.number)
            #expect(try row.decode(1, as: String?.self) == pair.text)
        }
    }

    @Test func nullsBindAndDecodeAsOptionals() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let row = try await connection.query("SELECT $1::text, $2::bigint IS NULL", [String?.none, Int64?.none])[0]
        #expect(try row.decode(0, as: String?.self) == nil)
        #expect(try row.decode(1, as: Bool.self) == true)
        #expect(throws: PostgresError.self) { try row.decode(0, as: String.self) }
    }

    @Test func serverErrorsCarrySQLState() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        try await connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES ($1)", [1])
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t VALUES ($1)", [1])
        }
        #expect(error?.sqlState == "23505")
        #expect(error?.isUniqueViolation == true)
        #expect(error?.kind == .server)
        let syntax = await #expect(throws: PostgresError.self) { try await connection.query("SELEC 1") }
        #expect(syntax?.sqlState == "42601")
        // The connection is still usable after errors.
        #expect(try await connection.query("SELECT count(*) FROM t")[0].decode(0, as: Int.self) == 1)
    }

    @Test func transactionRollsBackWhenTheBodyThrows() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        try await connection.execute("CREATE TABLE t (id int)")
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await connection.transaction { session in
                try session.query("INSERT INTO t VALUES ($1)", [1])
                throw Abort()
            }
        }
        try await connection.transaction { session in _ = try session.query("INSERT INTO t VALUES ($1)", [2]) }
        #expect(try await connection.query("SELECT array_agg(id) FROM t")[0].decode(0, as: [Int].self) == [2])
    }

    @Test func reconnectsAfterTheServerEndsTheSession() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let connection = try await database.connect()
        let killer = try await database.connect()
        let pid = try await connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
        // Prepare a statement first, so reconnecting must also forget prepared names.
        _ = try await connection.query("SELECT $1::int + 1", [1])
        try await killer.query("SELECT pg_terminate_backend($1)", [pid])
        let failure = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT $1::int + 1", [1])
        }
        #expect(failure?.kind == .connection)
        let answer = try await connection.query("SELECT $1::int + 1", [41])[0].decode(0, as: Int.self)
        #expect(answer == 42)
        #expect(try await connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) != pid)
    }

    /// A write refused as read-only (here in a transaction begun read-only, the refusal a server
    /// gives when it does not report itself read-only: before PostgreSQL 14, or behind PgBouncer):
    /// the refused write throws, the transaction still rolls back on its own connection, and the
    /// connection is replaced once the session ends (a new backend, prepared statements prepared
    /// again).
    @Test func readOnlyRefusalReplacesTheConnectionAfterTheSession() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let connection = try await database.connect()
        try await connection.execute("CREATE TABLE notes (note text)")
        _ = try await connection.query("INSERT INTO notes VALUES ($1)", ["prepared"])
        let pid = try await connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)

        let samePidAfterRefusal = Mutex<Int?>(nil)
        let failure = await #expect(throws: PostgresError.self) {
            try await connection.withSession { session in
                do {
                    try session.execute("BEGIN READ ONLY")
                    defer { try? session.execute("ROLLBACK") }
                    _ = try session.query("INSERT INTO notes VALUES ($1)", ["refused"])
                } catch {
                    // The rest of the session still has its connection.
                    samePidAfterRefusal.withLock {
                        $0 = try? session.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
                    }
                    throw error
                }
            }
        }
        #expect(failure?.sqlState == "25006")
        #expect(failure?.isReadOnlyServer == true)
        #expect(samePidAfterRefusal.withLock { $0 } == pid)

        _ = try await connection.query("INSERT INTO notes VALUES ($1)", ["written"])
        #expect(try await connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) != pid)
        let notes = try await connection.query("SELECT note FROM notes ORDER BY note")
        #expect(try (0..<notes.count).map { try notes[$0].decode(0, as: String.self) } == ["prepared", "written"])
    }

    @Test func badConnectionStringFailsWithLibpqMessage() async throws {
        let error = await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect("host=127.0.0.1 port=1 connect_timeout=2")
        }
        #expect(error?.kind == .connection)
        #expect(error?.message.contains("127.0.0.1") == true)
    }
}
