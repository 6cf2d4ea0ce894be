// swift-tools-version:6.0
import PackageDescription

// Layering: the C libraries are system-library targets imported only by HaulLoop; HaulCore (the engine) and
// HaulAPI (router, handlers, JSON) never see a C type; `haul` wires them together.
let package = Package(
    name: "haul",
    products: [
        .executable(name: "haul", targets: ["haul"])
    ],
    targets: [
        .systemLibrary(name: "CEvent", pkgConfig: "libevent", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystem"),
        // One C file: reads a field evhttp 2.1 offers no getter for (see its header).
        .target(name: "CEventRequest", dependencies: ["CEvent"]),
        // C++17: the extern "C" face of libtorrent-rasterbar (BitTorrent), with the defines its pkg-config file gives
        // (they change the library's types: they must match how Debian built it).
        .target(
            name: "CTorrent",
            cxxSettings: [
                .define("TORRENT_LINKING_SHARED"), .define("BOOST_ASIO_ENABLE_CANCELIO"),
                .define("BOOST_ASIO_NO_DEPRECATED"), .define("TORRENT_USE_OPENSSL"), .define("TORRENT_USE_LIBCRYPTO"),
                .define("TORRENT_SSL_PEERS"), .define("OPENSSL_NO_SSL2"), .define("BOOST_ALL_NO_LIB"),
            ],
            linkerSettings: [.linkedLibrary("torrent-rasterbar"), .linkedLibrary("stdc++")]),
        .target(
            name: "HaulLoop",
            dependencies: [
                "CEvent", "CEventRequest", "CCurl", "CSQLite", "CPostgres", "CCrypto", "CSystem", "CTorrent",
            ]),
        .target(name: "HaulCore", dependencies: ["HaulLoop"]),
        // What the server serves from its binary: openapi.yaml and the dashboard, compiled in as byte arrays.
        .target(
            name: "HaulAssets",
            resources: [
                .embedInCode("openapi.yaml"), .embedInCode("dashboard/index.html"), .embedInCode("dashboard/app.js"),
                .embedInCode("dashboard/app.css"),
            ]),
        .target(name: "HaulAPI", dependencies: ["HaulAssets", "HaulCore", "HaulLoop"]),
        .executableTarget(name: "haul", dependencies: ["HaulAPI", "HaulCore", "HaulLoop"]),
        .executableTarget(name: "TestOrigin", dependencies: ["HaulLoop"], path: "Tests/TestOrigin"),
        // libFuzzer target with `make fuzz`; otherwise a replayer of its corpus.
        .executableTarget(
            name: "HaulFuzz", dependencies: ["HaulAPI", "HaulCore", "HaulLoop"], path: "Tests/Fuzz",
            exclude: ["corpus"], swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        // Seams for tests: a manual clock and a fetcher that never answers.
        .target(name: "HaulTestSupport", dependencies: ["HaulLoop"], path: "Tests/Support"),
        .testTarget(name: "HaulCoreTests", dependencies: ["HaulCore", "HaulLoop", "HaulTestSupport"]),
        .testTarget(
            name: "HaulAPITests", dependencies: ["HaulAPI", "HaulAssets", "HaulCore", "HaulLoop", "HaulTestSupport"]),
        .testTarget(name: "HaulEndToEndTests", dependencies: ["HaulCore", "HaulLoop", "HaulTestSupport"]),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)
