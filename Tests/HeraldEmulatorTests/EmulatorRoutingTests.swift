import Testing

@testable import HeraldEmulator

/// Which route answers a request: the first added whose pattern matches, components compared one
/// to one and case-insensitively, `*` one component, or one or more as the last.
@Suite struct EmulatorRoutingTests {
    let router = EmulatorRoutes().router()

    func route(_ method: String, _ target: String) -> String? {
        router.route(method: method, path: EmulatorRouter.path(of: target))?.pattern
    }

    @Test func fcmAndHuaweiShareV1ByTheNumberOfComponents() {
        #expect(route("POST", "/v1/projects/p/messages:send") == "POST /v1/projects/*")
        #expect(route("POST", "/v1/app-1/messages:send") == "POST /v1/*/messages:send")
        // Both match: Huawei's was added first.
        #expect(route("POST", "/v1/projects/messages:send") == "POST /v1/*/messages:send")
        // The last `*` takes the rest: EmulatorState answers 404 for what is not a send.
        #expect(route("POST", "/v1/projects/p/messages:send/more") == "POST /v1/projects/*")
        #expect(route("POST", "/v1/projects/p") == "POST /v1/projects/*")
        #expect(route("POST", "/v1/projects") == nil)
        #expect(route("POST", "/v1/app-1/messages:send/more") == nil)
        #expect(route("GET", "/v1/projects/p/messages:send") == nil)
        #expect(route("POST", "/v3/p/messages:send") == "POST /v3/*/messages:send")
        #expect(route("POST", "/v3/messages:send") == nil)
    }

    @Test func literalsMatchInAnyCaseAndEmptyComponentsAreLeftOut() {
        #expect(route("POST", "/V1/Projects/p/MESSAGES:SEND") == "POST /v1/projects/*")
        #expect(route("POST", "/v1//projects//p//messages:send") == "POST /v1/projects/*")
        #expect(route("GET", "/emulator/Messages/") == "GET /emulator/messages")
        #expect(route("GET", "/emulator/messages?since=1") == "GET /emulator/messages")
        #expect(route("POST", "/emulator/messages") == nil)
        #expect(route("POST", "/TOKEN") == "POST /token")
        #expect(route("POST", "/token/more") == nil)
    }

    @Test func apnsAndWebPushRoutes() {
        #expect(route("POST", "/3/device/abc") == "POST /3/device/*")
        #expect(route("POST", "/3/device/abc/def") == "POST /3/device/*")
        #expect(route("POST", "/3/device") == nil)
        #expect(route("POST", "/4/broadcasts/apps/com.example") == "POST /4/broadcasts/apps/*")
        #expect(route("DELETE", "/1/apps/com.example/channels") == "DELETE /1/apps/*/channels")
        #expect(route("GET", "/1/apps/com.example/all-channels") == "GET /1/apps/*/all-channels")
        #expect(route("GET", "/1/apps/com.example/channels/more") == nil)
        #expect(route("PUT", "/1/apps/com.example/channels") == nil)
        #expect(route("POST", "/push/abc") == "POST /push/*")
        #expect(route("POST", "/push//abc/") == "POST /push/*")
        #expect(route("POST", "/push") == nil)
    }

    @Test func aPathIsDecodedAndItsDotSegmentsResolved() {
        #expect(EmulatorRouter.path(of: "/push/a%20b?x=1") == "/push/a b")
        #expect(EmulatorRouter.path(of: "/v1/x/../projects/p/./messages:send") == "/v1/projects/p/messages:send")
        #expect(route("POST", "/v1/projects/p/messages%3Asend") == "POST /v1/projects/*")
    }
}
