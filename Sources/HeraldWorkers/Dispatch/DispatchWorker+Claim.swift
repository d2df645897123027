import Foundation
import HeraldPostgres

extension DispatchWorker {
    /// A batch's work: up to `limit` deliveries ingest leased at birth first (while half their
    /// lease is left, ``BirthLeases``), and beside them a share claimed from the queue when it
    /// has some (at least ``BirthLeases/queueShare`` of `limit`, however many births), in one
    /// statement leasing until `now` plus the lease. Returns their rows, and when their leases
    /// were asked for (`startedAt`, read before `now`, or a birth's, earlier): they end no earlier
    /// than this plus the lease. Births it cannot send are given back.
    func claimBatch(limit: Int, now: Date, startedAt: ContinuousClock.Instant) async throws -> (
        rows: [PostgresRow], claimedAt: ContinuousClock.Instant
    ) {
        let held = context.births?.take(upTo: limit, fresh: context.lease / 2) ?? (births: [], leasedAt: nil, stale: [])
        if !held.stale.isEmpty {
            // Given back, due now: the next claim takes them (no NOTIFY says so).
            await BirthLeases.release(held.stale, context: context)
            context.births?.queueSignalled()
        }
        do {
            let rows = try await claim(limit: limit, births: held.births, now: now)
            claimTimer.finished(took: context.monotonicClock.now - startedAt, rows: rows.count, logger: context.logger)
            return (rows, min(startedAt, held.leasedAt ?? startedAt))
        } catch {
            if let births = context.births, let leasedAt = held.leasedAt {
                await BirthLeases.release(births.putBack(held.births, leasedAt: leasedAt), context: context)
            }
            throw error
        }
    }

    /// One claim (``SQL/claim``): births `births` (their ids) read, and a share of the queue
    /// leased when it has some (``BirthLeases/claimsQueue(holding:)``). Births the claim did not
    /// return (sent or taken since, or with less than half their lease left by the database's
    /// clock) are given back, so that none waits out its lease.
    private func claim(limit: Int, births: [Int64], now: Date) async throws -> [PostgresRow] {
        let fromQueue = context.births?.claimsQueue(holding: !births.isEmpty) ?? true
        let asked = fromQueue ? BirthLeases.fromQueue(limit: limit, held: births.count) : 0
        let rows: [PostgresRow]
        do {
            rows = Array(
                try await context.connection.query(
                    SQL.claim, [now, asked, context.workerID, context.lease.seconds, births]))
        } catch {
            if fromQueue { context.births?.queueSignalled() }
            throw error
        }
        var queued = rows.count
        if !births.isEmpty {
            var missing = Set(births)
            for row in rows {
                if let id = try? row.decode("delivery_id", as: Int64.self), missing.remove(id) != nil { queued -= 1 }
            }
            await BirthLeases.release(Array(missing), context: context)
        }
        // A full claim leaves more queued: the next batch claims again, births or not.
        if fromQueue, queued >= asked { context.births?.queueSignalled() }
        return rows
    }

    /// Reads claimed deliveries' rows (queued ones a claim leased, or births it read), with the
    /// version of each one's app (for ``AppSetups``). A row that cannot be read (whatever it
    /// holds: a value out of Swift's range, a column out of step) is not sent and ends `failed`
    /// with the reason; the rest of the batch goes on.
    func read(_ rows: [PostgresRow], catalog: RouteCatalog.Contents, now: Date) -> (
        readable: [OutgoingDelivery], unreadable: [Int64: DeliveryResult], appVersions: [String: String]
    ) {
        var readable: [OutgoingDelivery] = []
        var unreadable: [Int64: DeliveryResult] = [:]
        var waiting: [Int64: String] = [:]
        var versions: [String: String] = [:]
        readable.reserveCapacity(rows.count)
        for row in rows {
            // The primary key: a bigint, in every row handed here, so always readable.
            guard let id = try? row.decode("delivery_id", as: Int64.self) else { continue }
            do {
                let delivery = try Self.delivery(from: row, catalog: catalog, providers: providers)
                versions[delivery.appID] = try row.decode("app_version")
                readable.append(delivery)
            } catch let unknown as NotSendableHere {
                if case .route = unknown { self.routes.markStale() }
                // Unreadable, it has no expiry to pass: it waits, as if it had none.
                let expiresAt = (try? row.decode("expires_at", as: Date.self)) ?? .distantFuture
                unreadable[id] = Self.waiting(unknown, expiresAt: expiresAt, now: now)
                waiting[id] = unknown.description
            } catch {
                unreadable[id] = DeliveryResult(
                    state: .failed, error: "the delivery could not be read for sending, so it was not sent: \(error)")
            }
        }
        if unreadable.count > waiting.count {
            let failed = unreadable.keys.filter { waiting[$0] == nil }.sorted()
            context.logger.error(
                "failed deliveries whose rows could not be read; see herald.deliveries.last_error",
                metadata: ["count": "\(failed.count)", "deliveries": "\(failed.prefix(10))"])
        }
        if let (_, reason) = waiting.first {
            context.logger.notice(
                "deliveries wait for a daemon that can send them; see herald.deliveries.last_error",
                metadata: ["count": "\(waiting.count)", "first": "\(reason)"])
        }
        return (readable, unreadable, versions)
    }

    /// A claimed delivery this daemon cannot send, though a newer one may: the database (migrated
    /// by a newer Herald, in a rolling upgrade) names a payload kind, a route or a provider this
    /// binary does not have. It waits, with the reason, until a daemon that can sends it or
    /// its notification expires; it is never sent as something else.
    enum NotSendableHere: Error, CustomStringConvertible {
        case payloadKind(String)
        /// `herald.route_targets` sends the kind through a provider that does not build it.
        case notBuilt(OutgoingDelivery.Route, payloadKind: String)
        case route(String)
        case provider(OutgoingDelivery.Route)
        /// The route's provider is off in this daemon until `setting` turns it on.
        case turnedOff(OutgoingDelivery.Route, displayName: String, setting: String)
        /// The route's provider does not take this delivery's target (a token kind a newer
        /// provider takes, or a wrong row of `herald.route_targets`).
        case target(OutgoingDelivery.Route, tokenKind: String)

        var description: String {
            switch self {
            case .payloadKind(let kind): "payload kind \(kind)"
            case .notBuilt(let route, let kind):
                "payload kind \(kind) as provider \(route.provider) builds it (route \(route.name), herald.route_targets)"
            case .route(let name): "route \(name), which herald.routes did not have when this daemon read it"
            case .provider(let route): "provider \(route.provider) (route \(route.name))"
            case .target(let route, let kind):
                "token kind \(kind) as provider \(route.provider) takes it (route \(route.name))"
            case .turnedOff(let route, _, let setting): "provider \(route.provider), off until \(setting)=true"
            }
        }

        /// Why it waits, as `last_error` says it.
        var waitingReason: String {
            switch self {
            case .turnedOff(_, let name, let setting):
                "\(name) is off in the daemon that claimed it; a daemon with \(setting)=true will send it"
            default: "the daemon that claimed it does not know its \(self); a daemon that does will send it"
            }
        }
    }

    /// How long a delivery this daemon cannot send waits before a daemon claims it again.
    static let notSendableHereWait: TimeInterval = 60

    static func waiting(_ unknown: NotSendableHere, expiresAt: Date, now: Date) -> DeliveryResult {
        if expiresAt <= now {
            return DeliveryResult(
                state: .expired,
                error: "expired at \(expiresAt) before a daemon that could send it did: \(unknown.waitingReason)")
        }
        return DeliveryResult(
            state: .queued,
            error: "waiting: \(unknown.waitingReason)",
            requeue: .postponed(until: now.addingTimeInterval(notSendableHereWait)))
    }

    static func delivery(
        from row: PostgresRow, catalog: RouteCatalog.Contents, providers: [String: any ProviderRoute.Type]
    ) throws -> OutgoingDelivery {
        let kind = OutgoingDelivery.PayloadKind(rawValue: try row.decode("payload_kind"))
        let target = try OutgoingDelivery.Target(claimed: row, kind: kind)
        let route = try row.decode("route", as: String?.self).map { name in
            guard let route = catalog.routes[name] else { throw NotSendableHere.route(name) }
            guard let provider = providers[route.provider] else {
                if let off = compiledIn[route.provider], let setting = off.turnedOnBy {
                    throw NotSendableHere.turnedOff(route, displayName: off.displayName, setting: setting)
                }
                throw NotSendableHere.provider(route)
            }
            guard provider.payloadKinds.contains(kind) else {
                throw NotSendableHere.notBuilt(route, payloadKind: kind.rawValue)
            }
            if let target, !provider.accepts(target) {
                throw NotSendableHere.target(route, tokenKind: try row.decode("token_kind", as: String?.self) ?? "none")
            }
            return route
        }
        // Unrouted, it is cancelled: not when it is a kind that none of this daemon's providers
        // builds (a newer Herald's, whose routes this daemon does not read as that Herald does).
        if route == nil, !providers.values.contains(where: { $0.payloadKinds.contains(kind) }) {
            throw NotSendableHere.payloadKind(kind.rawValue)
        }
        return OutgoingDelivery(
            deliveryID: try row.decode("delivery_id"), appID: try row.decode("app_id"), payloadKind: kind,
            pushType: catalog.pushTypes[kind],
            attempts: try row.decode("attempts"), abandonedBy: try row.decode("abandoned_by", as: String?.self),
            notification: try OutgoingDelivery.Notification(claimed: row),
            device: try OutgoingDelivery.Device(claimed: row), target: target, route: route,
            configurationFailedAt: try row.decode("config_error_at", as: Date?.self),
            liveActivity: kind == .liveActivity || kind == .broadcast
                ? try OutgoingDelivery.LiveActivity(claimed: row, kind: kind) : nil,
            channel: kind == .broadcast ? try OutgoingDelivery.Channel(claimed: row) : nil)
    }
}

// Each part of a claimed delivery, decoded by its columns' names (`herald.claim_batch`).

extension OutgoingDelivery.Notification {
    init(claimed row: PostgresRow) throws {
        self.init(
            id: try row.decode("notification_id"),
            title: try row.decode("title", as: String?.self), body: try row.decode("body", as: String?.self),
            data: Self.stringPairs(try row.decode("data", as: String?.self)),
            imageURL: try row.decode("image_url", as: String?.self),
            sound: try row.decode("sound", as: String?.self),
            badge: try row.decode("badge", as: Int?.self),
            deepLink: try row.decode("deep_link", as: String?.self),
            // Ingest sets both before any delivery exists; a NULL here is a bug to hear about.
            priority: try row.decode("priority"), expiresAt: try row.decode("expires_at"),
            collapseKey: try row.decode("collapse_key", as: String?.self), silent: try row.decode("silent"),
            dryRun: try row.decode("dry_run"),
            // Anything but service (NULL for a row ingest did not class) is marketing, the
            // class that claims less.
            messageClass: MessageClass(rawValue: try row.decode("message_class", as: String?.self) ?? "") ?? .marketing,
            apple: Apple(
                category: try row.decode("ios_category", as: String?.self),
                threadID: try row.decode("ios_thread_id", as: String?.self),
                interruptionLevel: try row.decode("ios_interruption_level", as: String?.self),
                relevanceScore: try row.decode("ios_relevance_score", as: Double?.self),
                filterCriteria: try row.decode("ios_filter_criteria", as: String?.self),
                targetContentID: try row.decode("ios_target_content_id", as: String?.self)),
            android: Android(
                channelID: try row.decode("android_channel_id", as: String?.self),
                directBootOK: try row.decode("android_direct_boot_ok", as: Bool?.self),
                proxy: try row.decode("android_proxy", as: String?.self)))
    }

    /// A JSON object of strings, in its keys' order.
    static func stringPairs(_ json: String?) -> [(String, String)] {
        guard let json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return []
        }
        return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
    }
}

extension OutgoingDelivery.Target {
    /// The notification's topic, a broadcast's channel, or the device's token by its kind; nil
    /// when there is none.
    init?(claimed row: PostgresRow, kind: OutgoingDelivery.PayloadKind) throws {
        if kind == .topic {
            guard let topic = try row.decode("topic", as: String?.self) else { return nil }
            self = .topic(topic)
            return
        }
        if kind == .broadcast {
            guard let channel = try row.decode("channel_id", as: String?.self) else { return nil }
            self = .channel(channel)
            return
        }
        guard let token = try row.decode("push_token", as: String?.self) else { return nil }
        let tokenKind: String = try row.decode("token_kind")
        switch OutgoingDelivery.TokenKind(rawValue: tokenKind) {
        case .installationID: self = .installationID(token)
        case .apnsDeviceToken: self = .apnsDeviceToken(token)
        case .registrationToken: self = .registrationToken(token)
        case .webSubscription, nil:
            // A subscription, a browser's or another kind's, keeps its keys beside its endpoint;
            // only these kinds' rows are read for them.
            let p256dh = try row.decode("web_p256dh", as: Data?.self)
            if p256dh == nil && tokenKind != OutgoingDelivery.TokenKind.webSubscription.rawValue {
                self = .token(kind: tokenKind, token)
            } else {
                self = .subscription(
                    kind: tokenKind, endpoint: token, p256dh: [UInt8](p256dh ?? Data()),
                    auth: [UInt8](try row.decode("web_auth", as: Data?.self) ?? Data()))
            }
        }
    }
}

extension OutgoingDelivery.Device {
    /// Nil for a topic send or a broadcast.
    init?(claimed row: PostgresRow) throws {
        guard let rowID = try row.decode("device_id", as: Int64?.self) else { return nil }
        self.init(
            rowID: rowID, disabledReason: try row.decode("device_disabled_reason", as: String?.self),
            registeredAgainAt: try row.decode("registered_again_at", as: Date?.self),
            reportReference: try row.decode("report_reference"),
            pushTypeTokenRowID: try row.decode("push_type_token_id", as: Int64?.self),
            pushTypeTokenDisabledReason: try row.decode("push_type_token_disabled", as: String?.self))
    }
}

extension OutgoingDelivery.LiveActivity {
    /// Nil when its token (a broadcast's channel) or event is missing (the delivery is then not
    /// sent: ``DeliveryLife``).
    init?(claimed row: PostgresRow, kind: OutgoingDelivery.PayloadKind) throws {
        let token = try row.decode("activity_token", as: String?.self)
        let tokenRowID = try row.decode("activity_token_id", as: Int64?.self)
        let name = try row.decode(kind == .broadcast ? "activity_channel" : "activity_id", as: String?.self)
        guard kind == .broadcast || (token != nil && tokenRowID != nil), let name,
            let event = Event(rawValue: try row.decode("activity_event", as: String?.self) ?? ""),
            let eventAt = try row.decode("activity_event_at", as: Date?.self)
        else { return nil }
        self.init(
            event: event, activityID: name, token: token, tokenRowID: tokenRowID,
            tokenEndedReason: try row.decode("activity_token_ended", as: String?.self),
            supersededBy: try row.decode("superseded_by", as: Int64?.self),
            attributesType: try row.decode("activity_attributes_type", as: String?.self),
            attributes: try row.decode("activity_attributes", as: String?.self),
            contentState: try row.decode("activity_content_state", as: String?.self),
            staleAt: try row.decode("activity_stale_at", as: Date?.self),
            dismissAt: try row.decode("activity_dismiss_at", as: Date?.self), eventAt: eventAt)
    }
}

extension OutgoingDelivery.Channel {
    init(claimed row: PostgresRow) throws {
        self.init(
            name: try row.decode("activity_channel", as: String?.self) ?? "",
            state: try row.decode("channel_state", as: String?.self),
            storesLatest: try row.decode("channel_stores_latest", as: Bool?.self) ?? false)
    }
}
