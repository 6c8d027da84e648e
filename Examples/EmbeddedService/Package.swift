// swift-tools-version:6.0
// A service that embeds the StallWatch watchdog, depending on StallWatch by version as any service would.
//
// STALLWATCH_PACKAGE_URL names the StallWatch repository (default: the checkout this example lives in, as a
// file:// URL) and STALLWATCH_VERSION the lowest release accepted (default 1.0.0). scripts/check-example.sh
// sets both to a tagged clone of the current commit.
import PackageDescription

let repositoryRoot = Context.packageDirectory + "/../.."
let stallWatchURL = Context.environment["STALLWATCH_PACKAGE_URL"] ?? "file://" + repositoryRoot
let stallWatchVersion = Version(Context.environment["STALLWATCH_VERSION"] ?? "1.0.0") ?? "1.0.0"

let package = Package(
    name: "EmbeddedService",
    dependencies: [
        .package(url: stallWatchURL, from: stallWatchVersion)
    ],
    targets: [
        .executableTarget(
            name: "EmbeddedService",
            dependencies: [.product(name: "StallWatch", package: "StallWatch")])
    ],
    swiftLanguageModes: [.v6]
)
