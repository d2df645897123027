// TEMPORARY until the HeraldWebPush policy lands.
public struct WebPushEndpointPolicy: Sendable, Equatable {
    public var hosts: [String]
    public var privateAddresses: Bool
}
