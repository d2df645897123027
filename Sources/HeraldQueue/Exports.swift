// The queue's API speaks in HeraldCore's clock and backoff types.
@_exported import HeraldCore
