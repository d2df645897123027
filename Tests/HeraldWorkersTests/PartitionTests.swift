import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldStatus
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// The hot tables are partitioned by generation (migration 020): retention drops whole
/// generations, and what still waits in one is kept, ids unchanged, and still sent.
@Suite struct PartitionTests {
    /// Opens the next generation now and retires every closed one, as passes do once the
    /// partition interval and an hour's retention have gone by (closed two hours ago, so what
    /// died just now is within the retention); returns the generations retired and the rows
    /// they kept.
    static func rotateAndRetire(_ db: PostgresConnection) async throws -> (
        retired: [Int], notifications: Int, deliveries: Int, reports: Int
    ) {
        try await db.query("SELECT herald.open_generation(interval '0 seconds')")
        try await db.execute(
            "UPDATE herald.generations SET closed_at = closed_at - interval '2 hours' WHERE closed_at IS NOT NULL")
        var done: (retired: [Int], notifications: Int, deliveries: Int, reports: Int) = ([], 0, 0, 0)
        while let row = try await db.query("SELECT * FROM herald.retire_generation(interval '1 hour')").first,
            let generation = try row.decode("generation", as: Int?.self)
        {
            done.notifications += try row.decode("kept_notifications", as: Int.self)
            done.deliveries += try row.decode("kept_deliveries", as: Int.self)
            done.reports += try row.decode("kept_reports", as: Int.self)
            for hot in ["deliveries", "notifications"] {
                let dropped = try await db.query(
                    "SELECT herald.drop_generation($1, $2, interval '1 hour')", [generation, hot])[0]
                try #require(try dropped.decode(0, as: Bool.self), "generation \(generation)'s \(hot) dropped")
            }
            done.retired.append(generation)
        }
        return done
    }

    static func partitionsOf(_ db: PostgresConnection, _ table: String) async throws -> [String] {
        try await db.query(
            """
            SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = $1::regclass ORDER BY 1
            """, ["herald.\(table)_rotating"]
        ).map { try $0.decode(0, as: String.self) }
    }

    @Test func aRetiredGenerationKeepsWhatStillWaitsAndTheRestIsDropped() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.register("tablet", "android")
        try await f.db.execute(
            """
            -- Finished, scheduled a year ahead, backing off for an hour, dead, and not yet ingested.
            SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'done ' || n) FROM generate_series(1, 20) n;
            SELECT herald.send('shop', device_ids => ARRAY['pixel', 'tablet'], title => 'next year',
                               send_at => now() + interval '360 days', idempotency_key => 'birthday');
            SELECT herald.send('shop', device_ids => ARRAY['tablet'], title => 'backing off');
            SELECT herald.send('shop', device_ids => ARRAY['tablet'], title => 'dead');
            """)
        try await f.ingest()
        try await f.dispatch()
        try await f.db.execute(
            """
            UPDATE herald.deliveries d SET state = 'queued', attempts = 3, run_at = now() + interval '1 hour', finished_at = NULL
            FROM herald.notifications n WHERE n.id = d.notification_id AND n.title = 'backing off';
            UPDATE herald.deliveries d SET state = 'failed', dead_at = now(), last_error = 'gave up'
            FROM herald.notifications n WHERE n.id = d.notification_id AND n.title = 'dead';
            SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'waiting for ingest');
            """)
        let generation = try await f.db.query(
            "SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL")[
                0
            ].decode(0, as: Int.self)
        #expect(try await Self.partitionsOf(f.db, "deliveries").contains("deliveries_g\(generation)"))

        let pass = try await Self.rotateAndRetire(f.db)
        #expect(pass.retired.contains(generation), "\(pass)")
        // Four notifications still wait (the scheduled one, the one backing off, the dead one's,
        // the one not yet ingested); four deliveries (two scheduled, one backing off, one dead).
        #expect(pass.notifications == 4 && pass.deliveries == 4, "\(pass)")
        #expect(try await !Self.partitionsOf(f.db, "notifications").contains("notifications_g\(generation)"))
        #expect(try await !Self.partitionsOf(f.db, "deliveries").contains("deliveries_g\(generation)"))
        let kept = try await f.db.query(
            "SELECT title FROM herald.notifications WHERE kept ORDER BY title"
        ).map { try $0.decode(0, as: String.self) }
        #expect(kept == ["backing off", "dead", "next year", "waiting for ingest"])
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.notifications WHERE NOT kept")[0].decode(0, as: Int.self)
                == 0)

        // Kept work is still done: ingested, sent when due, and the key still names its notification.
        try await f.db.execute("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.ingest()
        try await f.dispatch()
        let states = try await f.db.query(
            "SELECT state, count(*) FROM herald.deliveries GROUP BY state ORDER BY state"
        ).map { "\(try $0.decode(0, as: String.self))=\(try $0.decode(1, as: Int.self))" }
        #expect(states == ["failed=1", "sent=4"], "\(states)")
        let again = try await f.db.query(
            "SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'x', idempotency_key => 'birthday') = id FROM herald.notifications WHERE title = 'next year'"
        )[0].decode(0, as: Bool.self)
        #expect(again, "the key still names the kept notification")

        // Once the retention has gone by since they finished or died, the kept rows go too.
        #expect(
            try await Pruner(connection: f.db, retention: .seconds(0), logger: Logger(label: "test")).pass().pruned == 4
        )
        #expect(try await f.db.query("SELECT count(*) FROM herald.notifications")[0].decode(0, as: Int.self) == 0)
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.deliveries WHERE kept")[0].decode(0, as: Int.self) == 0)
    }

    /// A generation's reports go with its deliveries; one not yet applied is kept and applied
    /// later, and a report on a delivery kept out of its generation is taken after that
    /// generation is gone.
    @Test func aGenerationsReportsGoWithItAndThoseNotYetAppliedAreKept() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.db.execute(
            "SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'n' || n) FROM generate_series(1, 3) n")
        try await f.ingest()
        try await f.dispatch()
        let ids = try await f.db.query("SELECT id FROM herald.deliveries ORDER BY id").map {
            try $0.decode(0, as: Int64.self)
        }
        try #require(ids.count == 3)
        func report(_ delivery: Int64) async throws -> String {
            try await f.db.query(
                """
                SELECT outcome FROM herald.report_delivery(
                    (SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries WHERE id = $1))
                """, [delivery])[0].decode(0, as: String.self)
        }
        func reconcile() async throws {
            try await f.db.query(
                "SELECT * FROM herald.reconcile(ARRAY(SELECT id FROM herald.delivery_reports WHERE processed_at IS NULL), now(),"
                    + " '30 minutes', '1 minute')"
            )
        }
        // The first reported and applied, the second reported only; the third backs off (kept).
        #expect(try await report(ids[0]) == "accepted")
        try await reconcile()
        #expect(try await report(ids[1]) == "accepted")
        try await f.db.execute(
            "UPDATE herald.deliveries SET state = 'queued', attempts = 3, run_at = now() + interval '1 hour' WHERE id = \(ids[2])"
        )

        let pass = try await Self.rotateAndRetire(f.db)
        #expect(pass.reports == 1 && pass.deliveries == 1, "\(pass)")
        #expect(
            try await Self.partitionsOf(f.db, "delivery_reports").allSatisfy {
                !pass.retired.contains(Int($0.dropFirst("delivery_reports_g".count)) ?? -1)
            })
        let left = try await f.db.query(
            "SELECT delivery_id, kept, processed_at IS NULL FROM herald.delivery_reports ORDER BY id"
        ).map {
            "\(try $0.decode(0, as: Int64.self)) \(try $0.decode(1, as: Bool.self)) \(try $0.decode(2, as: Bool.self))"
        }
        #expect(left == ["\(ids[1]) true true"], "only the report not yet applied is left, kept")

        // The kept delivery is reported now, its generation gone: taken, and applied with the other.
        #expect(try await report(ids[2]) == "accepted")
        #expect(try await report(ids[2]) == "already_reported")
        try await reconcile()
        #expect(
            try await f.db.query("SELECT state FROM herald.deliveries WHERE id = $1", [ids[2]])[0].decode(
                0, as: String.self) == "delivered")
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.delivery_reports WHERE processed_at IS NULL")[0].decode(
                0, as: Int.self) == 0)
        // Applied and older than the retention, the kept reports are pruned.
        _ = await Pruner(connection: f.db, retention: .seconds(0), logger: Logger(label: "test")).pass()
        #expect(try await f.db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(0, as: Int.self) == 0)
    }

    /// A report written while its delivery's generation retires lands beside the delivery: the
    /// report holds the delivery until it commits, and retirement then moves both.
    @Test func aReportWrittenAsItsGenerationRetiresIsKeptWithItsDelivery() async throws {
        let f = try await WorkerFixture.make()
        // The generations before this test's rows are gone: the next to retire is its own.
        _ = try await Self.rotateAndRetire(f.db)
        try await f.register("pixel", "android")
        try await f.db.execute("SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'n')")
        try await f.ingest()
        try await f.dispatch()
        // Backing off, so kept when its generation retires.
        try await f.db.execute(
            """
            UPDATE herald.deliveries SET state = 'queued', attempts = 3, run_at = now() + interval '1 hour';
            SELECT herald.open_generation(interval '0 seconds');
            UPDATE herald.generations SET closed_at = closed_at - interval '2 hours' WHERE closed_at IS NOT NULL;
            """)
        let reporter = try await f.database.connect()
        let retirer = try await f.database.connect()
        try await reporter.execute(
            """
            BEGIN;
            SELECT herald.report_delivery(herald.delivery_reference(id, device_id)) FROM herald.deliveries;
            """)
        let retiring = Task {
            try await retirer.query("SELECT kept_reports FROM herald.retire_generation(interval '1 hour')")[0].decode(
                0, as: Int.self)
        }
        // Retirement waits for the report's transaction.
        let blocked =
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        #expect(
            try await eventually(timeout: .seconds(30)) {
                try await f.db.query(blocked)[0].decode(0, as: Int.self) == 1
            }, "retirement waits for the report")
        try await reporter.execute("COMMIT")
        #expect(try await retiring.value == 1)
        let sides = try await f.db.query(
            "SELECT d.kept, r.kept, r.processed_at IS NULL FROM herald.delivery_reports r JOIN herald.deliveries d ON d.id = r.delivery_id"
        ).map { [try $0.decode(0, as: Bool.self), try $0.decode(1, as: Bool.self), try $0.decode(2, as: Bool.self)] }
        #expect(sides == [[true, true, true]], "the report is kept beside its delivery, to be applied")
    }

    /// A generation lives for the retention after it closed: a pass before that retires nothing.
    @Test func aGenerationIsRetiredOnlyOnceTheRetentionHasGoneBySinceItClosed() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let week = Pruner(
            connection: db, retention: .seconds(7 * 24 * 3600), partitionInterval: .seconds(3600),
            logger: Logger(label: "test"))
        let opened = try await db.query("SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL")[0]
            .decode(0, as: Int.self)
        #expect(await week.pass().retired == [])
        // An hour later the next one opens; nothing is retired for a week after that.
        try await db.execute(
            "UPDATE herald.generations SET opened_at = opened_at - interval '1 hour' WHERE opened_at IS NOT NULL")
        #expect(await week.pass().retired == [])
        let open = try await db.query("SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL")[0]
            .decode(0, as: Int.self)
        #expect(open == opened + 1)
        #expect(
            try await db.query("SELECT count(*) FROM herald.generations WHERE opened_at IS NULL")[0].decode(
                0, as: Int.self) == Pruner.generationsAhead)
        try await db.execute(
            "UPDATE herald.generations SET closed_at = closed_at - interval '6 days' WHERE closed_at IS NOT NULL")
        #expect(await week.pass().retired == [])
        try await db.execute(
            "UPDATE herald.generations SET closed_at = closed_at - interval '1 day' WHERE closed_at IS NOT NULL")
        #expect(await week.pass().retired.count == 2, "the first one, and the one closed an hour ago")
    }

    /// A table no moment leaves free (here a reader in a long transaction) holds its generation
    /// back without failing the pass; a pass told to queue waits for the lock at most as long as
    /// it was told, and gets it once the reader ends.
    @Test func aTableNeverFreeIsQueuedForWithinABound() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let reader = try await database.connect()
        let watcher = try await database.connect()
        let pruner = Pruner(connection: db, retention: .seconds(0), logger: Logger(label: "test"))
        try await db.query("SELECT herald.open_generation(interval '0 seconds')")
        try await reader.execute("BEGIN; SELECT count(*) FROM herald.deliveries")

        let free = await pruner.pass()
        #expect(free.lockedOut && free.retired.isEmpty && free.failed == 0, "\(free)")
        let started = ContinuousClock.now
        let bounded = await pruner.pass(queueFor: .milliseconds(100))
        let took = ContinuousClock.now - started
        #expect(bounded.lockedOut && bounded.retired.isEmpty && bounded.failed == 0, "\(bounded)")
        // Half a second of tries, then 100 ms in the queue: nothing near the reader's minutes.
        #expect(took < .seconds(10), "the pass queued for \(took)")

        let queued = Task { await pruner.pass(queueFor: .seconds(60)) }
        let waiting = """
            SELECT count(*) FROM pg_locks
            WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND relation = 'herald.deliveries_rotating'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted
            """
        #expect(
            try await eventually(timeout: .seconds(30)) {
                try await watcher.query(waiting)[0].decode(0, as: Int.self) == 1
            }, "the pass queued for the lock")
        try await reader.execute("COMMIT")
        let done = await queued.value
        #expect(!done.lockedOut && !done.retired.isEmpty && done.failed == 0, "\(done)")
        #expect(
            try await db.query("SELECT count(*) FROM herald.generations WHERE closed_at IS NOT NULL")[0].decode(
                0, as: Int.self) == 0)
    }

    /// Should no retention pass run for a whole generation's 4 billion ids, rows flow on into the
    /// generation made ahead, never refused, and the next pass opens the one after it; status
    /// says when no generation is left ahead.
    @Test func aFullGenerationFlowsIntoTheOneMadeAheadAndTheNextPassOpensPastIt() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        let open = try await f.db.query("SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL")[0]
            .decode(0, as: Int.self)
        // Three ids left in the open generation, for the notifications and for the deliveries.
        try await f.db.query(
            "SELECT setval('herald.notifications_id_seq', $1), setval('herald.deliveries_id_seq', $1)",
            [(Int64(open + 1) << 32) - 4])
        for n in 1...6 {
            try await f.db.execute("SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'n\(n)')")
        }
        try await f.ingest()
        let placed = try await f.db.query(
            "SELECT tableoid::regclass::text, count(*) FROM herald.notifications GROUP BY 1 ORDER BY 1"
        ).map { "\(try $0.decode(0, as: String.self))=\(try $0.decode(1, as: Int.self))" }
        #expect(placed == ["herald.notifications_g\(open)=3", "herald.notifications_g\(open + 1)=3"], "\(placed)")

        // Nothing opened for long: status says so once no generation is left ahead.
        try await f.db.execute("UPDATE herald.generations SET opened_at = now() WHERE opened_at IS NULL")
        #expect(try await StatusReport.load(f.db).problems(maximumReadyAge: 300).contains { $0.contains("made ahead") })
        try await f.db.query("UPDATE herald.generations SET opened_at = NULL WHERE generation > $1", [open])

        let pass = await Pruner(connection: f.db, logger: Logger(label: "test")).pass()
        #expect(pass.failed == 0)
        let now = try await f.db.query("SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL")[0]
            .decode(0, as: Int.self)
        #expect(now == open + 2, "past the generation the ids flowed into")
        try await f.db.execute("SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'placed')")
        let next = try await f.db.query(
            "SELECT tableoid::regclass::text FROM herald.notifications WHERE title = 'placed'")[0].decode(
                0, as: String.self)
        #expect(next == "herald.notifications_g\(open + 2)")
        #expect(try await StatusReport.load(f.db).partitions?.ahead == Pruner.generationsAhead)
        try await f.dispatch()
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")[0].decode(
                0, as: Int.self) == 6)
    }

    /// The partial indexes ingest and the claim walk (notifications waiting, deliveries due) keep
    /// their dead entries until a vacuum cleans them (migrations 030 and 042): every partition of
    /// both tables is vacuumed at a hundredth of its rows dead, with its indexes, and so is each
    /// partition a new generation makes.
    @Test func everyPartitionOfTheQueuesIsVacuumedEarlyWithItsIndexes() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        for _ in 0..<2 { try await db.query("SELECT herald.open_generation(interval '0 seconds')") }
        let settings = try await db.query(
            """
            SELECT t.relid::text, coalesce(array_to_string(c.reloptions, ','), '')
            FROM unnest(ARRAY['herald.notifications', 'herald.deliveries']::regclass[]) AS parent,
                 pg_partition_tree(parent) AS t JOIN pg_class c ON c.oid = t.relid
            WHERE t.isleaf ORDER BY 1
            """
        ).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self)) }
        #expect(settings.count >= 14, "kept and at least six generations a table: \(settings)")
        for (partition, options) in settings {
            #expect(options == "autovacuum_vacuum_scale_factor=0.01,vacuum_index_cleanup=on", "\(partition)")
        }
    }

    /// A lookup by id (a report's reference, an outcome recorded) reads the kept partition and the
    /// one generation its id names, however many generations there are.
    @Test func aLookupByIdReadsTwoPartitions() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        for _ in 0..<4 { try await db.query("SELECT herald.open_generation(interval '0 seconds')") }
        let partitions = try await Self.partitionsOf(db, "deliveries").count
        #expect(partitions >= 8, "\(partitions)")
        try await db.execute(
            "PREPARE lookup(bigint) AS SELECT state FROM herald.deliveries WHERE id = $1; SET plan_cache_mode = force_generic_plan"
        )
        let plan = try await db.query(
            "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF) EXECUTE lookup(12884901889)"
        )
        .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
        let scanned = plan.split(separator: "\n").filter { $0.contains("Scan") && !$0.contains("Bitmap Index Scan") }
        #expect(scanned.count == 2, "\(plan)")
    }

    /// A dead delivery made in the generation after its notification's (ingested just after the
    /// switch) outlives the notification when both are old: it is deleted too, not left in the
    /// kept partition for ever, and cannot be redriven once its notification is gone.
    @Test func aDeadDeliveryWhoseNotificationIsGoneIsPrunedNotKeptForEver() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.db.execute("SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'late')")
        try await f.db.query("SELECT herald.open_generation(interval '0 seconds')")
        try await f.ingest()
        try await f.db.execute(
            """
            UPDATE herald.deliveries SET state = 'failed', dead_at = now() - interval '2 hours', run_at = NULL, last_error = 'x';
            UPDATE herald.notifications SET created_at = now() - interval '3 hours';
            """)
        let hour = Pruner(connection: f.db, retention: .seconds(3600), logger: Logger(label: "test"))
        // The notification's generation retires (the dead delivery is too old to keep it), then
        // the delivery's; it is kept, dead, with nothing to send.
        try await f.db.execute(
            "UPDATE herald.generations SET closed_at = now() - interval '2 hours' WHERE closed_at IS NOT NULL")
        _ = await hour.pass()
        #expect(try await f.db.query("SELECT count(*) FROM herald.notifications")[0].decode(0, as: Int.self) == 0)
        try await f.db.query("SELECT herald.open_generation(interval '0 seconds')")
        try await f.db.execute(
            "UPDATE herald.generations SET closed_at = now() - interval '2 hours' WHERE closed_at IS NOT NULL")
        try await f.db.execute("UPDATE herald.deliveries SET dead_at = now()")  // died within the retention: kept
        _ = await hour.pass()
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.deliveries WHERE kept")[0].decode(0, as: Int.self) == 1)
        #expect(try await f.db.query("SELECT herald.redrive(kind => 'dispatch')")[0].decode(0, as: Int.self) == 0)
        try await f.db.execute("UPDATE herald.deliveries SET dead_at = now() - interval '2 hours'")
        let pass = await hour.pass()
        #expect(pass.failed == 0)
        #expect(try await f.db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self) == 0)
    }

    /// Retiring generations while ingest and dispatch claim and record beside it: no statement of
    /// theirs fails but the transient one PostgreSQL gives for a row that moved partition as it
    /// was updated (the workers try those again), and none deadlocks, also when a pass queues for
    /// a table's lock.
    @Test func retiringBesideIngestAndDispatchDeadlocksNeither() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let retention = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'd' || n, 'android', 'token-' || n, 'alice') FROM generate_series(1, 5) n;
            """)
        let end = ContinuousClock.now + .seconds(5)
        let worker = Task {
            var failures: [String] = []
            var rounds = 0
            while ContinuousClock.now < end {
                do {
                    try await db.execute(
                        """
                        SELECT herald.send('shop', user_ref => 'alice', title => 'n', send_at => CASE WHEN random() < 0.2 THEN now() + interval '1 day' END);
                        SELECT herald.ingest_next(100);
                        SELECT count(*) FROM herald.claim_batch(now(), 100, 'w', interval '1 minute');
                        UPDATE herald.deliveries SET state = 'sent', sent_at = now(), finished_at = now(), run_at = NULL, locked_by = NULL
                        WHERE locked_by = 'w' AND state = 'queued';
                        """)
                    rounds += 1
                } catch let error as PostgresError where error.sqlState == "40001" {
                    continue
                } catch {
                    failures.append("\(error)")
                }
            }
            return (rounds, failures)
        }
        var retired = 0
        var passes = 0
        var lockWaits = 0
        while ContinuousClock.now < end {
            do {
                try await retention.query("SELECT herald.open_generation(interval '0 seconds')")
                // Every other pass queues for the locks, as one does after passes found no free moment.
                passes += 1
                retired += await Pruner(connection: retention, retention: .seconds(0), logger: Logger(label: "test"))
                    .pass(queueFor: passes % 2 == 0 ? Pruner.queueForLock : nil).retired.count
            } catch let error as PostgresError where error.sqlState == "55P03" {
                lockWaits += 1
            }
        }
        let (rounds, failures) = await worker.value
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        // Under that load a drop may find its table never free and leave it to a later pass (how
        // many went through depends on the machine); once the work stops, the next pass drops them.
        let during = retired
        let after = await Pruner(connection: retention, retention: .seconds(0), logger: Logger(label: "test")).pass()
        retired += after.retired.count
        #expect(after.failed == 0)
        #expect(
            rounds > 0 && retired > 0, "\(rounds) rounds of work, \(retired) generations retired, \(lockWaits) waits")
        print(
            "retiring beside work: \(rounds) rounds of work, \(during) generations retired during it, \(retired) in all,"
                + " \(lockWaits) lock waits given up")
        // Nothing lost: every notification ingested, every delivery sent or scheduled.
        let left = try await db.query(
            "SELECT count(*) FILTER (WHERE state = 'queued' AND run_at < now() + interval '1 hour') FROM herald.deliveries"
        )[0]
        #expect(try left.decode(0, as: Int.self) == 0)
    }

    /// A row that moves to the kept partition passes whatever became of its key: pruned after the
    /// retention, and given since to a newer notification.
    @Test func aKeptRowMovesWhateverBecameOfItsKey() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            SELECT herald.send('shop', topic => 'deals', title => 'first', idempotency_key => 'k');
            DELETE FROM herald.idempotency_keys;
            SELECT herald.send('shop', topic => 'deals', title => 'second', idempotency_key => 'k');
            """)
        let retired = try await Self.rotateAndRetire(db)
        #expect(retired.notifications == 2, "\(retired)")
        let kept = try await db.query("SELECT title FROM herald.notifications WHERE kept ORDER BY id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(kept == ["first", "second"])
    }

    @Test func anIdempotencyKeyNamesOneNotificationAcrossGenerations() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.addApp("shop", fcmProject: "p")
        let first = try await db.query(
            "SELECT herald.send('shop', topic => 'deals', title => 'a', idempotency_key => 'k')")[0].decode(
                0, as: Int64.self)
        try await db.query("SELECT herald.open_generation(interval '0 seconds')")
        let second = try await db.query(
            "SELECT herald.send('shop', topic => 'deals', title => 'b', idempotency_key => 'k')")[0].decode(
                0, as: Int64.self)
        #expect(second == first)
        // A plain INSERT with a used key writes nothing, as ON CONFLICT DO NOTHING did.
        let inserted = try await db.query(
            "INSERT INTO herald.notifications (app_id, topic, title, idempotency_key) VALUES ('shop', 'deals', 'c', 'k'), ('shop', 'deals', 'd', 'other') RETURNING title"
        )
        #expect(try inserted.map { try $0.decode(0, as: String.self) } == ["d"])
        #expect(try await db.query("SELECT count(*) FROM herald.notifications")[0].decode(0, as: Int.self) == 2)
        // Another app may use the same key.
        try await db.addApp("blog", fcmProject: "p")
        let blog = try await db.query(
            "SELECT herald.send('blog', topic => 'posts', title => 'a', idempotency_key => 'k')")[0].decode(
                0, as: Int64.self)
        #expect(blog != first)
    }
}
