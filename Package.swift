// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .library(name: "HeraldPostgres", targets: ["HeraldPostgres"]),
        .library(name: "HeraldQueue", targets: ["HeraldQueue"]),
        .library(name: "HeraldSchema", targets: ["HeraldSchema"]),
        .library(name: "HeraldFCM", targets: ["HeraldFCM"]),
        .library(name: "HeraldEmulator", targets: ["HeraldEmulator"]),
        .executable(name: "herald-emulator", targets: ["herald-emulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries from Debian, as system-library targets.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),

        // Which addresses a request may connect to: the HTTP/2 engine's and libcurl's guard.
        .target(name: "CAddress"),
        // The HTTP/2 engine HeraldHTTP sends https requests with: nghttp2 over OpenSSL, on epoll.
        .target(
            name: "CHTTP2",
            dependencies: ["CAddress"],
            linkerSettings: [.linkedLibrary("nghttp2"), .linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),

        // Child processes for tests, started with none of the test process's descriptors.
        .target(name: "CSpawn"),

        // The C shim over OpenSSL libcrypto: PEM and raw P-256 keys, RS256 and ES256 signatures,
        // ECDH, HKDF, AES-128-GCM.
        .target(
            name: "CCrypto",
            linkerSettings: [.linkedLibrary("crypto")]
        ),

        // Clock, backoff, what became of a send, the configuration scopes, the JSON Herald writes
        // itself and Herald's worker kinds, shared by the queue, the workers and every provider.
        .target(name: "HeraldCore"),
        // Keys, JWTs, HMAC and Web Push ciphers, over the C shim.
        .target(name: "HeraldCrypto", dependencies: ["CCrypto", "HeraldCore"]),

        // libpq in Swift: connections, parameters, rows, LISTEN/NOTIFY.
        .target(
            name: "HeraldPostgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The schema: migrations/*.sql, embedded at build time by the plugin below, and the
        // migrator that applies them.
        .executableTarget(name: "herald-embed-migrations"),
        .plugin(
            name: "EmbedMigrations",
            capability: .buildTool(),
            dependencies: ["herald-embed-migrations"],
            path: "Sources/EmbedMigrationsPlugin"
        ),
        .target(
            name: "HeraldSchema",
            dependencies: ["HeraldPostgres", .product(name: "Logging", package: "swift-log")],
            plugins: ["EmbedMigrations"]
        ),
        // The durable job queue: claim, batched completion, backoff, lease rescue, wake-up, the
        // worker loop. Generic: it knows no worker of Herald's.
        .target(
            name: "HeraldQueue",
            dependencies: [
                "HeraldCore",
                "HeraldPostgres",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The async HTTP client: https through Herald's HTTP/2 engine (CHTTP2), the rest (plain
        // http, egress proxies, servers without HTTP/2) through libcurl; and OAuth2 access tokens.
        .target(
            name: "HeraldHTTP",
            dependencies: [
                "CAddress", "CCurl", "CHTTP2", "HeraldCore", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // FCM HTTP v1: service accounts, JWTs, OAuth access tokens, messages, typed outcomes.
        .target(
            name: "HeraldFCM",
            dependencies: [
                "HeraldCrypto", "HeraldCore", "HeraldHTTP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // APNs' provider API: provider tokens, certificates, notifications, Apple's answers.
        .target(
            name: "HeraldAPNs",
            dependencies: ["HeraldCrypto", "HeraldCore", "HeraldHTTP"]
        ),
        // Web Push: subscriptions, RFC 8291 encryption, VAPID (RFC 8292), sending (RFC 8030).
        .target(
            name: "HeraldWebPush",
            dependencies: ["HeraldCrypto", "HeraldCore", "HeraldHTTP"]
        ),
        // Huawei Push Kit's server APIs: HMS Core's Android v1 and HarmonyOS NEXT's v3, their
        // credentials (OAuth 2.0 client, service-account JWTs), messages and result codes.
        .target(
            name: "HeraldPushKit",
            dependencies: [
                "HeraldCrypto", "HeraldCore", "HeraldHTTP", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Local stand-ins for FCM v1 + OAuth and a Web Push service, for tests, the demo and app
        // developers: a plain HTTP/1.1 server on Hummingbird, as the endpoint is.
        .target(
            name: "HeraldEmulator",
            dependencies: [
                "HeraldFCM", "HeraldWebPush", "HeraldCrypto", "HeraldCore", "HeraldHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "herald-emulator",
            dependencies: [
                "HeraldEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The workers (ingest, dispatch, reconcile, retry, channels) and retention; the providers,
        // one folder each behind one protocol (Providers/).
        .target(
            name: "HeraldWorkers",
            dependencies: [
                "HeraldCore", "HeraldPostgres", "HeraldQueue", "HeraldCrypto", "HeraldFCM", "HeraldWebPush",
                "HeraldAPNs", "HeraldPushKit", "HeraldHTTP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // What `herald status` and the endpoint's metrics read of the database: queues, problems,
        // saturated routes, paused quotas, partitions.
        .target(name: "HeraldStatus", dependencies: ["HeraldCore", "HeraldPostgres"]),

        // The HTTP endpoint apps call: delivery reports, the pending fetch, health.
        .target(
            name: "HeraldEndpoint",
            dependencies: [
                "HeraldCore", "HeraldPostgres", "HeraldStatus",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // Configuration, worker registry and the services `herald run` starts.
        .target(
            name: "HeraldDaemon",
            dependencies: [
                "HeraldWorkers",
                "HeraldEndpoint",
                "HeraldSchema",
                "HeraldFCM",
                .product(name: "Prometheus", package: "swift-prometheus"),
                "HeraldHTTP",
                "HeraldPostgres",
                "HeraldQueue",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldDaemon",
                "HeraldSchema",
                "HeraldCrypto",
                "HeraldStatus",
                "HeraldPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // Benchmarks that print figures (scripts/bench-*.sh run them beside their floors).
        .executableTarget(
            name: "herald-bench",
            dependencies: [
                "HeraldDaemon", "HeraldSchema", "HeraldQueue", "HeraldWorkers", "HeraldPostgres", "HeraldHTTP",
                "HeraldFCM", "HeraldCrypto", "HeraldWebPush", "HeraldEndpoint",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Test doubles and the throwaway-database helper, shared by every test target.
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldPostgres", "HeraldQueue", "HeraldSchema", "HeraldCrypto", "HeraldFCM", "HeraldEmulator",
                "CSpawn",
                // LocalServer, a plain HTTP/1.1 server answering with a closure.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                // The hostile HTTP/2 server, which writes its frames by hand over TLS.
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "HeraldPostgresTests",
            dependencies: ["HeraldPostgres", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldSchemaTests",
            dependencies: ["HeraldSchema", "HeraldPostgres", "HeraldQueue", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldQueueTests",
            dependencies: ["HeraldQueue", "HeraldPostgres", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldStatusTests",
            dependencies: ["HeraldStatus"]
        ),
        .testTarget(
            name: "HeraldHTTPTests",
            dependencies: ["HeraldHTTP", "CHTTP2", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldCoreTests",
            dependencies: ["HeraldCore"]
        ),
        .testTarget(
            name: "HeraldCryptoTests",
            dependencies: ["HeraldCrypto", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldAPNsTests",
            dependencies: [
                "HeraldAPNs", "HeraldCrypto", "HeraldCore", "HeraldHTTP", "HeraldEmulator", "HeraldTestSupport",
            ]
        ),
        .testTarget(
            name: "HeraldWebPushTests",
            dependencies: [
                "HeraldWebPush", "HeraldCrypto", "HeraldCore", "HeraldHTTP", "HeraldEmulator", "HeraldTestSupport",
            ]
        ),
        .testTarget(
            name: "HeraldFCMTests",
            dependencies: ["HeraldFCM", "HeraldEmulator", "HeraldHTTP", "HeraldCore", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldWorkersTests",
            dependencies: [
                "HeraldWorkers", "HeraldQueue", "HeraldStatus", "HeraldPostgres", "HeraldTestSupport", "HeraldFCM",
                "HeraldPushKit", "HeraldEmulator", "HeraldEndpoint", "HeraldCrypto",
                "HeraldHTTP", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "HeraldEndpointTests",
            dependencies: [
                "HeraldEndpoint", "HeraldPostgres", "HeraldCrypto", "HeraldHTTP", "HeraldTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "HeraldEmulatorTests",
            dependencies: ["HeraldEmulator", "HeraldFCM", "HeraldCrypto", "HeraldHTTP"]
        ),
        .testTarget(
            name: "HeraldDaemonTests",
            dependencies: [
                "HeraldDaemon", "HeraldQueue", "HeraldPostgres", "HeraldTestSupport", "HeraldEmulator", "HeraldHTTP",
            ]
        ),
    ]
)
