/// The queue's statements, in one place, as an operator would read them. `JobQueue` plans each
/// at every call: `herald.jobs` is one small table whose size swings with the backlog, so a plan
/// is cheap to make and right for the table as it is, where one kept from when the table held
/// a few rows would read it whole as a backlog grew.
extension JobQueue {
    /// Public so that the benchmarks' floor runs the engine's own statements.
    public enum SQL {
        /// Takes up to $3 ready jobs of kind $1 due by $2, oldest first, and leases them to
        /// worker $4 for $5 seconds. SKIP LOCKED lets concurrent claimers take disjoint rows;
        /// the subquery walks the partial index `jobs_claim` in its own order, and each picked
        /// job is updated by key, never through a join a plan could turn around (see "How the
        /// hot path's statements are planned" in docs/architecture.md).
        public static let claim = """
            WITH picked AS (
                SELECT id
                FROM herald.jobs
                WHERE kind = $1 AND state = 'ready' AND run_at <= $2
                ORDER BY run_at, id
                LIMIT $3
                FOR UPDATE SKIP LOCKED
            )
            UPDATE herald.jobs AS j
            SET state = 'running',
                attempts = j.attempts + 1,
                locked_by = $4,
                locked_until = $2 + make_interval(secs => $5)
            FROM picked
            WHERE j.id = ANY(ARRAY[picked.id])
            RETURNING j.id, j.ref, j.payload, j.attempts, j.max_attempts
            """

        /// Finishes a batch in one round trip: completed jobs ($1) leave the table; the others
        /// ($2 ids, $3 next run, $4 error, $5 give up now, $8 postponed) go back to ready, or to
        /// dead when they gave up or used their last attempt. A postponed job gets its attempt
        /// back and never dies. Only while worker $7 still holds the lease, so a rescued and
        /// re-claimed job is not disturbed. $6 is now.
        public static let finish = """
            WITH completed AS (
                DELETE FROM herald.jobs WHERE id = ANY($1::bigint[])
            )
            UPDATE herald.jobs AS j
            SET state = CASE WHEN NOT f.postponed AND (f.give_up OR j.attempts >= j.max_attempts)
                             THEN 'dead' ELSE 'ready' END,
                dead_at = CASE WHEN NOT f.postponed AND (f.give_up OR j.attempts >= j.max_attempts)
                               THEN $6::timestamptz END,
                attempts = j.attempts - CASE WHEN f.postponed THEN 1 ELSE 0 END,
                run_at = f.run_at,
                last_error = f.error,
                locked_by = NULL,
                locked_until = NULL
            FROM unnest($2::bigint[], $3::timestamptz[], $4::text[], $5::bool[], $8::bool[])
                 AS f(id, run_at, error, give_up, postponed)
            WHERE j.id = ANY(ARRAY[f.id]) AND j.state = 'running' AND j.locked_by = $7
            """

        /// The common case of `finish`: every job of the batch completed.
        public static let complete = "DELETE FROM herald.jobs WHERE id = ANY($1::bigint[])"

        /// Hands unfinished jobs back without counting the attempt (a graceful shutdown).
        public static let release = """
            UPDATE herald.jobs
            SET state = 'ready', attempts = greatest(attempts - 1, 0), locked_by = NULL, locked_until = NULL
            WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
            """

        /// Returns up to $2 jobs whose lease passed before $1 to ready (their process died),
        /// with the attempt counted; a job out of attempts goes dead instead.
        public static let rescue = """
            WITH expired AS (
                SELECT id
                FROM herald.jobs
                WHERE state = 'running' AND locked_until < $1
                ORDER BY locked_until
                LIMIT $2
                FOR UPDATE SKIP LOCKED
            )
            UPDATE herald.jobs AS j
            SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'ready' END,
                dead_at = CASE WHEN j.attempts >= j.max_attempts THEN $1::timestamptz END,
                last_error = format('lease expired: %s stopped before finishing attempt %s',
                                    coalesce(j.locked_by, 'a worker'), j.attempts),
                run_at = $1,
                locked_by = NULL,
                locked_until = NULL
            FROM expired
            WHERE j.id = expired.id
            RETURNING j.kind, j.state
            """

        public static let enqueue = """
            INSERT INTO herald.jobs (kind, ref, payload, run_at, max_attempts)
            VALUES ($1, $2, $3::jsonb, coalesce($4::timestamptz, now()), $5::int)
            RETURNING id
            """
    }
}
