// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .library(name: "HeraldPostgres", targets: ["HeraldPostgres"]),
        .library(name: "HeraldQueue", targets: ["HeraldQueue"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
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

        // libpq in Swift: connections, parameters, rows, LISTEN/NOTIFY.
        .target(
            name: "HeraldPostgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The durable job queue: claim, batched completion, backoff, rescue, wake-up, migrations.
        .target(
            name: "HeraldQueue",
            dependencies: [
                "HeraldPostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Configuration, worker registry and the services `herald run` starts.
        .target(
            name: "HeraldDaemon",
            dependencies: [
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
                "HeraldQueue",
                "HeraldPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Test doubles and the throwaway-database helper, shared by every test target.
        .target(
            name: "HeraldTestSupport",
            dependencies: ["HeraldPostgres", "HeraldQueue"]
        ),
        .testTarget(
            name: "HeraldPostgresTests",
            dependencies: ["HeraldPostgres", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldQueueTests",
            dependencies: ["HeraldQueue", "HeraldPostgres", "HeraldTestSupport"]
        ),
        .testTarget(
            name: "HeraldDaemonTests",
            dependencies: ["HeraldDaemon", "HeraldQueue", "HeraldPostgres", "HeraldTestSupport"]
        ),
    ]
)
