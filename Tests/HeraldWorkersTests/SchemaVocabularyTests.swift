import Foundation
import HeraldCore
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// The Swift enums that name states, kinds and scopes say exactly what the schema's CHECK
/// constraints allow, so a value added on one side only fails here, not in production.
@Suite struct SchemaVocabularyTests {
    /// The values a single-column CHECK constraint (`column = ANY ('{…}')`, migration 043) allows,
    /// sorted.
    func allowed(_ db: PostgresConnection, _ table: String, _ column: String) async throws -> [String] {
        let definitions = try await db.query(
            """
            SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
            WHERE c.conrelid = $1::regclass AND c.contype = 'c' AND a.attname = $2 AND cardinality(c.conkey) = 1
              AND pg_get_constraintdef(c.oid) LIKE '%ANY%'
            """, [table, column]
        ).map { try $0.decode(0, as: String.self) }
        #expect(definitions.count == 1, "\(table).\(column): \(definitions)")
        let list = try #require(
            (definitions.first ?? "").firstMatch(of: /ANY \('\{([a-z_,]+)\}'::text\[\]\)/),
            "write the CHECK of \(table).\(column) as \(column) = ANY ('{…}') (migrations/README.md)")
        return list.1.split(separator: ",").map(String.init).sorted()
    }

    @Test func enumsMatchTheCheckConstraints() async throws {
        let db = try await TestDatabase.create().connect()
        #expect(
            try await allowed(db, "herald.deliveries", "state") == DeliveryState.allCases.map(\.rawValue).sorted())
        var built = Set<String>()
        for provider in Providers.compiledIn {
            built.formUnion(provider.payloadKinds.map { kind in kind.rawValue })
        }
        #expect(try await allowed(db, "herald.deliveries", "payload_kind") == built.sorted())
    }

    /// The routing tables and the compiled-in providers agree: every route's provider is one of
    /// them, every scope a route needs is one its provider can find failing, the scopes are
    /// exactly the providers' own, and the token kinds Swift reads by name are in the schema.
    /// A provider added by its recipe (docs/architecture.md) keeps all of this true.
    @Test func theRoutingTablesNameTheCompiledInProviders() async throws {
        let db = try await TestDatabase.create().connect()
        let kinds = try await db.query("SELECT token_kind FROM herald.token_kinds").map {
            try $0.decode(0, as: String.self)
        }
        #expect(Set(OutgoingDelivery.TokenKind.allCases.map(\.rawValue)).isSubset(of: kinds))
        let scopes = try await db.query("SELECT scope FROM herald.config_scopes ORDER BY 1").map {
            try $0.decode(0, as: String.self)
        }
        let declared = Providers.compiledIn.flatMap { provider in provider.scopes.map(\.rawValue) }
        #expect(scopes == declared.sorted())
        let routes = try await RouteCatalog().contents(connection: db).routes
        #expect(!routes.isEmpty)
        let providers = Providers.byName(Providers.compiledIn)
        for route in routes.values {
            let provider = try #require(providers[route.provider], "\(route)")
            #expect(Set(route.scopes).isSubset(of: provider.scopes), "\(route)")
        }
        // Each routing rule sends its payload kind through a provider that builds it.
        let rules = try await db.query("SELECT payload_kind, provider FROM herald.route_rules").map {
            (OutgoingDelivery.PayloadKind(rawValue: try $0.decode(0)), try $0.decode(1, as: String.self))
        }
        for (kind, provider) in rules {
            #expect(providers[provider]?.payloadKinds.contains(kind) == true, "\(kind) through \(provider)")
        }
    }

    /// `herald.push_types` and Swift agree on each of APNs' other push types: its payload kind
    /// sends that push type (``APNsRoute/pushTypes``, and the push type the claim gives its
    /// deliveries), and APNs' route takes its token kind for it.
    @Test func thePushTypesAreTheOnesAPNsSends() async throws {
        let db = try await TestDatabase.create().connect()
        let rows = try await db.query("SELECT push_type, payload_kind, token_kind FROM herald.push_types").map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self), try $0.decode(2, as: String.self))
        }
        #expect(Set(rows.map(\.1)) == Set(APNsRoute.pushTypes.keys.map(\.rawValue)))
        let claimed = try await RouteCatalog().contents(connection: db).pushTypes
        for (pushType, payloadKind, tokenKind) in rows {
            let kind = OutgoingDelivery.PayloadKind(rawValue: payloadKind)
            #expect(APNsRoute.pushTypes[kind]?.rawValue == pushType)
            #expect(claimed[kind] == pushType)
            #expect(APNsRoute.pushType(ofTokenKind: tokenKind)?.rawValue == pushType)
            #expect(APNsRoute.accepts(.token(kind: tokenKind, "ab")))
        }
        #expect(APNsRoute.pushType(ofTokenKind: "apns_device_token") == nil)
        #expect(!APNsRoute.accepts(.token(kind: "hms_token", "ab")))
    }

    /// The schema makes work for workers by kind: `notify_worker` wakes the kind named in its
    /// argument, and a trigger or function that inserts `herald.jobs` rows names their kind.
    /// Those are exactly the ``WorkerKind``s that have a queue.
    @Test func triggersMakeWorkForTheWorkerKinds() async throws {
        let db = try await TestDatabase.create().connect()
        let kinds = try await db.query(
            #"""
            SELECT rtrim(encode(t.tgargs, 'escape'), '\000') FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
            WHERE p.proname = 'notify_worker' AND NOT t.tgisinternal
            UNION
            SELECT m[1] FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
            CROSS JOIN LATERAL regexp_matches(
                p.prosrc, 'INSERT INTO herald\.jobs \(kind[^)]*\) (?:SELECT |VALUES \()''([a-z_]+)''', 'g') AS m
            WHERE s.nspname = 'herald'
            """#
        ).map { try $0.decode(0, as: String.self) }
        #expect(Set(kinds) == Set(WorkerKind.allCases.filter(\.isQueued).map(\.rawValue)), "\(kinds)")
    }
}
