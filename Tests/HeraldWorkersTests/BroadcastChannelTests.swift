import Foundation
import HeraldAPNs
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Broadcast channels (iOS 18): made and deleted at APNs by the channels worker, sent to with
/// one request for every subscriber; against a real database and the emulator's APNs (its
/// channel-management API and broadcasts, behind nginx), which checks what Apple checks.
@Suite struct BroadcastChannelTests {
    func channels(_ f: WorkerFixture) async throws {
        try await f.queue.drain(ChannelWorker(context: f.context))
    }

    func channel(_ f: WorkerFixture, _ name: String) async throws -> (state: String, id: String?, reason: String?) {
        let row = try await f.db.query(
            "SELECT state, channel_id, reason FROM herald.channels('shop') WHERE channel = $1 ORDER BY changed_at DESC",
            [name])[0]
        return (try row.decode(0), try row.decode(1, as: String?.self), try row.decode(2, as: String?.self))
    }

    func broadcast(_ f: WorkerFixture, _ name: String, _ status: String, _ extra: String = "") async throws -> Int64 {
        try await f.db.query(
            "SELECT herald.broadcast_activity('shop', $1, jsonb_build_object('score', $2::text)\(extra))",
            [name, status])[0].decode(0, as: Int64.self)
    }

    func delivery(_ f: WorkerFixture, _ notification: Int64) async throws -> (
        state: String, error: String?, name: String?, attempts: Int
    ) {
        let row = try await f.db.query(
            "SELECT state, last_error, provider_message_id, attempts FROM herald.deliveries WHERE notification_id = $1",
            [notification])[0]
        return (
            try row.decode(0), try row.decode(1, as: String?.self), try row.decode(2, as: String?.self),
            try row.decode(3)
        )
    }

    @Test func aChannelIsCreatedSentToAndDeleted() async throws {
        let f = try await WorkerFixture.make(apns: true)
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        #expect(try await channel(f, "match-7").state == "creating")
        try await channels(f)
        let made = try await channel(f, "match-7")
        #expect(made.state == "active")
        let channelID = try #require(made.id)
        #expect(await f.emulator.apnsChannels[WorkerFixture.bundleID] == [channelID: 0], "no message stored")

        let sent = try await broadcast(f, "match-7", "2-1", ", title => 'Goal!', urgent => true")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await delivery(f, sent)
        #expect(delivery.state == "sent", "\(delivery)")
        let received = try #require(await f.emulator.apnsBroadcasts.first)
        #expect(received.channelID == channelID)
        #expect(received.bundleID == WorkerFixture.bundleID)
        #expect(received.headers["apns-push-type"] == "liveactivity")
        #expect(received.headers["apns-priority"] == "10")
        #expect(received.headers["apns-expiration"] == "0", "a channel that stores nothing takes only 0")
        #expect(received.headers["apns-topic"] == nil)
        #expect(received.headers["apns-request-id"] == delivery.name, "the request id is the message's name")
        let unique = try await f.db.query(
            "SELECT provider_unique_id FROM herald.deliveries WHERE notification_id = $1", [sent])[0]
        #expect(try unique.decode(0, as: String?.self) == received.uniqueID, "APNs' apns-unique-id is read")
        #expect(received.aps["event"] as? String == "update")
        #expect((received.aps["content-state"] as? [String: Any])?["score"] as? String == "2-1")
        #expect((received.aps["alert"] as? [String: String])?["title"] == "Goal!")
        #expect(await f.emulator.apnsReceived.isEmpty, "one request for every subscriber, no device push")

        #expect(try await f.db.query("SELECT herald.delete_channel('shop', 'match-7')")[0].decode(0, as: Bool.self))
        try await channels(f)
        #expect(try await channel(f, "match-7").state == "deleted")
        #expect(await f.emulator.apnsChannels[WorkerFixture.bundleID]?.isEmpty == true)
        let late = try await broadcast(f, "match-7", "3-1")
        try await f.ingest()
        let refused = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [late])[0]
        #expect(try refused.decode(0, as: String.self) == "rejected")
        #expect(try refused.decode(1, as: String.self).contains("channel 'match-7' is deleted"))
        // The name is free again, as soon as it is being deleted; a policy APNs cannot change is
        // refused.
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        #expect(try await channel(f, "match-7").state == "creating")
        try await channels(f)
        #expect(try await f.db.query("SELECT herald.delete_channel('shop', 'match-7')")[0].decode(0, as: Bool.self))
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        let policy = await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT herald.create_channel('shop', 'match-7', stores_latest => true)")
        }
        #expect(policy?.message.contains("cannot change") == true, "\(String(describing: policy))")
        try await channels(f)
        let states = try await f.db.query("SELECT state FROM herald.broadcast_channels ORDER BY id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["deleted", "deleted", "active"])
        #expect(await f.emulator.apnsChannels[WorkerFixture.bundleID]?.count == 1)
    }

    /// The producer deletes a channel while APNs is making it: the channel APNs made is deleted
    /// there too, not left behind.
    @Test func aChannelDeletedWhileAPNsMadeItIsDeletedThere() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let id = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")[0].decode(0, as: Int64.self)
        let setup = try await AppSetups().setups(
            ["shop": try await f.db.query("SELECT xmin::text FROM herald.apps")[0].decode(0, as: String.self)],
            connection: f.db)
        // The worker read the row (creating); the producer deletes it before APNs answers.
        let read = ChannelWorker.Channel(
            id: id, app: "shop", name: "match-7", storesLatest: false, state: "creating", channelID: nil)
        #expect(try await f.db.query("SELECT herald.delete_channel('shop', 'match-7')")[0].decode(0, as: Bool.self))
        #expect(await ChannelWorker(context: f.context).work(read, app: setup["shop"]) == .completed)
        let row = try await f.db.query("SELECT state, channel_id FROM herald.broadcast_channels")[0]
        #expect(try row.decode(0, as: String.self) == "deleted")
        #expect(try row.decode(1, as: String?.self) != nil, "the id APNs gave, to say what was deleted")
        #expect(await f.emulator.apnsChannels[WorkerFixture.bundleID]?.isEmpty == true)
    }

    @Test func aBroadcastWaitsForItsChannelAndAStoringChannelKeepsTheExpiry() async throws {
        let f = try await WorkerFixture.make(apns: true)
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'flight-9', stores_latest => true)")
        let early = try await broadcast(f, "flight-9", "boarding", ", ttl => '2 hours'")
        try await f.ingest()
        try await f.dispatch()
        let waiting = try await delivery(f, early)
        #expect(waiting.state == "queued")
        #expect(waiting.attempts == 0, "waiting for the channel is not an attempt")
        #expect(waiting.error?.contains("being created") == true, "\(waiting)")

        try await channels(f)
        try await f.db.query("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.dispatch()
        #expect(try await delivery(f, early).state == "sent")
        let received = try #require(await f.emulator.apnsBroadcasts.first)
        let expiration = try #require(Int(received.headers["apns-expiration"] ?? ""))
        #expect(abs(expiration - Int(Date().timeIntervalSince1970) - 7200) < 60, "kept for offline devices")
        #expect(await f.emulator.apnsChannels[WorkerFixture.bundleID]?.values.first == 1)
    }

    @Test func aChannelAPNsNoLongerKnowsFailsItsBroadcastAloneAndANewerBroadcastSupersedes() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        try await channels(f)
        // Deleted at APNs behind Herald's back.
        let client = try channelClient(f)
        #expect(await client.delete(channelID: try #require(try await channel(f, "match-7").id)) == .deleted)
        let orphan = try await broadcast(f, "match-7", "1-0")
        let alert = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Kick-off')")[0]
            .decode(0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()
        let failed = try await delivery(f, orphan)
        #expect(failed.state == "failed")
        #expect(failed.error?.contains("ChannelNotRegistered") == true, "\(failed)")
        #expect(try await delivery(f, alert).state == "sent", "the app's other sends go on")
        #expect(try await f.db.query("SELECT 1 FROM herald.app_config_problems").isEmpty)
        // The channel fails with APNs' words, and the next broadcast is refused at ingest.
        let dead = try await channel(f, "match-7")
        #expect(dead.state == "failed")
        #expect(dead.reason?.contains("ChannelNotRegistered") == true, "\(dead)")
        let next = try await broadcast(f, "match-7", "2-0")
        try await f.ingest()
        let refusal = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [next])[0]
        #expect(try refusal.decode(0, as: String.self) == "rejected")
        #expect(try refusal.decode(1, as: String.self).contains("channel 'match-7' is failed"))

        // A newer broadcast supersedes an older one still waiting; an older one arriving late
        // is not sent.
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-8')")
        try await channels(f)
        let first = try await broadcast(f, "match-8", "0-0", ", event_at => now() + interval '10 seconds'")
        let second = try await broadcast(f, "match-8", "1-0", ", event_at => now() + interval '20 seconds'")
        let stale = try await broadcast(f, "match-8", "0-1", ", event_at => now() + interval '15 seconds'")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await delivery(f, first).state == "cancelled")
        #expect(try await delivery(f, second).state == "sent")
        let verdict = try await f.db.query("SELECT state FROM herald.notifications WHERE id = $1", [stale])[0]
        #expect(try verdict.decode(0, as: String.self) == "superseded")
    }

    @Test func theChannelClientCreatesReadsListsAndDeletesAsAppleDocuments() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let client = try channelClient(f)
        guard case .created(let stored) = await client.create(storesLatest: true),
            case .created(let unstored) = await client.create(storesLatest: false)
        else {
            Issue.record("APNs made no channel")
            return
        }
        #expect(await client.read(channelID: stored) == .found(storesLatest: true))
        #expect(await client.read(channelID: unstored) == .found(storesLatest: false))
        #expect(await client.list() == .listed(channelIDs: [stored, unstored].sorted()))
        #expect(await client.delete(channelID: stored) == .deleted)
        guard case .unknownChannel(let reason) = await client.read(channelID: stored) else {
            Issue.record("a deleted channel is unknown")
            return
        }
        #expect(reason.contains("ChannelNotRegistered"))
        // Another bundle's key is refused.
        let other = APNsChannelClient(
            authentication: try authentication(f), bundleID: "com.example.other", environment: .development,
            baseURL: try #require(f.pushService).baseURL, http: try http(f))
        guard case .refused(let refusal) = await other.list() else {
            Issue.record("another bundle's channels are refused")
            return
        }
        #expect(refusal.contains("403 TopicMismatch"))
        // A request that cannot be sent is refused, not tried again.
        let unsendable = APNsChannelClient(
            authentication: try authentication(f), bundleID: "com.example.app\r\nx-injected: 1",
            environment: .development, baseURL: try #require(f.pushService).baseURL, http: try http(f))
        guard case .refused(let unsent) = await unsendable.list() else {
            Issue.record("a request that cannot be sent is refused")
            return
        }
        #expect(unsent.hasPrefix("APNs request not sent: "), "\(unsent)")
    }

    @Test(arguments: [
        ("SELECT herald.broadcast_activity('shop', 'nowhere', '{}')", "unknown channel 'nowhere'"),
        ("SELECT herald.broadcast_activity('shop', 'match-7', '[]')", "content_state must be a JSON object"),
        (
            "SELECT herald.broadcast_activity('shop', 'match-7', jsonb_build_object('x', repeat('x', 5200)))",
            "over APNs' 5120"
        ),
    ])
    func ingestRejectsABroadcastItCannotSend(call: String, reason: String) async throws {
        let f = try await WorkerFixture.make(apns: true)
        _ = try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        let id = try await f.db.query(call)[0].decode(0, as: Int64.self)
        try await f.ingest()
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [id])[0]
        #expect(try row.decode(0, as: String.self) == "rejected")
        let said = try row.decode(1, as: String.self)
        #expect(said.contains(reason), "\(said)")
    }

    @Test func anAppWithoutAnAPNsSetupCannotMakeAChannelAndABroadcastCannotStart() async throws {
        let f = try await WorkerFixture.make()
        let error = await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT herald.create_channel('shop', 'match-7')")
        }
        #expect(error?.message.contains("has no APNs setup") == true, "\(String(describing: error))")
        let start = await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT herald.broadcast_activity('shop', 'match-7', '{}', event => 'start')")
        }
        #expect(start?.message.contains("cannot start a Live Activity") == true, "\(String(describing: start))")
    }

    func http(_ f: WorkerFixture) throws -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = try #require(f.pushService).caBundle
        return HTTPClient(configuration: configuration)
    }

    func authentication(_ f: WorkerFixture) throws -> APNsAuthentication {
        .token(
            try APNsProviderTokens.load(file: try #require(f.apnsKey).path, teamID: "TEAM123456", keyID: "KEY1234567"))
    }

    /// The fixture app's channel client, as the channels worker makes it.
    func channelClient(_ f: WorkerFixture) throws -> APNsChannelClient {
        APNsChannelClient(
            authentication: try authentication(f), bundleID: WorkerFixture.bundleID, environment: .development,
            baseURL: try #require(f.pushService).baseURL, http: try http(f))
    }
}
