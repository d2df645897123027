import HeraldAPNs
import HeraldFCM

@testable import HeraldWorkers

/// Rows of `herald.routes`, for the tests that run without a database
/// (`SchemaVocabularyTests` checks the real ones).
extension OutgoingDelivery.Route {
    static let fcm = Self(name: "fcm", provider: FCMRoute.name, description: "FCM", scopes: [.fcm])
    static let apns = Self(name: "apns", provider: APNsRoute.name, description: "iOS straight to APNs", scopes: [.apns])
}
