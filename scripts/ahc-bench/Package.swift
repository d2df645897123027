// swift-tools-version:6.1
import PackageDescription

// AsyncHTTPClient sending what `herald-bench http` sends, for `scripts/bench-http.sh` to set beside
// Herald's HTTP/2 engine. A package of its own, so that Herald's build (and CI) never compiles
// AsyncHTTPClient.
let package = Package(
    name: "ahc-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        .executableTarget(
            name: "ahc-bench",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        )
    ]
)
