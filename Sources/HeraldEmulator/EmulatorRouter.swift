import Foundation
import Hummingbird
import NIOCore

/// A request as the emulator's handlers see it, its body read whole.
struct EmulatorRequest: Sendable {
    var method: String
    /// The path without the query, percent-decoded, its dot segments resolved.
    var path: String
    /// The headers, names lower-cased; of a name sent more than once, the last value.
    var headers: [String: String]
    var body: Data
    /// The query's parameters, percent-decoded; of a name given more than once, the last value.
    var query: [String: String] = [:]
}

/// A route: methods and a path pattern. The pattern's components are matched one to one with
/// the path's (empty ones left out), case-insensitively; `*` matches any one component, and as
/// the last one any one or more. So `/v1/*/messages:send` matches `/v1/app/messages:send` only,
/// and `/v1/projects/*` matches `/v1/projects/p/messages:send`.
struct EmulatorRoute: Sendable {
    enum Component: Sendable, Equatable {
        case wildcard
        case literal(String)

        func matches(_ node: Substring) -> Bool {
            switch self {
            case .wildcard: true
            case .literal(let text): node.caseInsensitiveCompare(text) == .orderedSame
            }
        }
    }

    /// As written: `POST /3/device/*`.
    let pattern: String
    let methods: Set<String>
    let components: [Component]
    let handler: @Sendable (EmulatorRequest) async throws -> Response

    /// `route` is a method, or several joined by commas, a space and the path pattern:
    /// `POST /3/device/*`.
    init(_ route: String, handler: @escaping @Sendable (EmulatorRequest) async throws -> Response) {
        pattern = route
        let parts = route.split(separator: " ", maxSplits: 1)
        precondition(parts.count == 2, "a route is a method and a path: \(route)")
        methods = Set(parts[0].split(separator: ",").map { $0.uppercased() })
        components = parts[1].split(separator: "/").map { $0 == "*" ? .wildcard : .literal(String($0)) }
        self.handler = handler
    }

    func matches(method: String, path: String) -> Bool {
        guard methods.contains(method) else { return false }
        let nodes = path.split(separator: "/")
        guard nodes.count >= components.count else { return nodes.isEmpty && components.first == .wildcard }
        // The components past the pattern's end are the last `*`'s, or none may be.
        guard nodes.count == components.count || components.last == .wildcard else { return false }
        return zip(components, nodes).allSatisfy { $0.matches($1) }
    }
}

/// The emulator's routes in the order they were added: the first that matches a request answers
/// it; none, 404. A handler that throws gets 500; a body over ``maxBodyBytes``, 413 (every
/// service the emulator stands in for takes a few KiB at most).
struct EmulatorRouter: HTTPResponder {
    typealias Context = BasicRequestContext
    static let maxBodyBytes = 1 << 20

    private(set) var routes: [EmulatorRoute] = []

    mutating func add(_ route: String, handler: @escaping @Sendable (EmulatorRequest) async throws -> Response) {
        routes.append(EmulatorRoute(route, handler: handler))
    }

    func respond(to request: Request, context: Context) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maxBodyBytes)
        } catch is NIOTooManyBytesError {
            return Response(status: .contentTooLarge)
        }
        let path = Self.path(of: request.head.path ?? "/")
        let method = request.method.rawValue
        guard let route = route(method: method, path: path) else { return Response(status: .notFound) }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        do {
            let query = (URLComponents(string: request.head.path ?? "/")?.queryItems ?? []).reduce(into: [:]) {
                $0[$1.name] = $1.value ?? ""
            }
            return try await route.handler(
                EmulatorRequest(
                    method: method, path: path, headers: headers, body: Data(body.readableBytesView), query: query))
        } catch {
            return Response(status: .internalServerError)
        }
    }

    /// The route that answers `method` on `path` (as ``path(of:)`` gives it): the first added
    /// that matches.
    func route(method: String, path: String) -> EmulatorRoute? {
        routes.first { $0.matches(method: method, path: path) }
    }

    /// The path of a request target (`/a/b%20c?q=1`): without the query, percent-decoded, its
    /// dot segments resolved (`/a/b c`).
    static func path(of target: String) -> String {
        (URLComponents(string: target)?.percentEncodedPath).flatMap { URL(string: $0)?.standardized.path } ?? ""
    }
}

/// A provider's stand-in: the routes it answers, and the errors it can be told to give.
protocol EmulatedService: Sendable {
    /// Adds its routes; the services' are tried in the order ``EmulatorRoutes/services`` lists
    /// them.
    func addRoutes(to router: inout EmulatorRouter)
    /// Gives `behaviour` to its next `times` sends (nil: until changed) to `token`, a token or an
    /// endpoint as it takes them; one it never sends to is never met.
    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) async
}
