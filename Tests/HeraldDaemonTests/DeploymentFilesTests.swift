import Foundation
import HeraldDaemon
import HeraldTestSupport
import Testing

@Suite struct DeploymentFilesTests {
    @Test func environmentExampleListsEverySettingWithItsDefault() throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("deploy/herald.env"), encoding: .utf8)
        for setting in Configuration.settings {
            #expect(text.contains("#\(setting.name)="), "deploy/herald.env lacks \(setting.name)")
        }
        // The example's uncommented form must itself be a valid configuration.
        let values = text.split(separator: "\n").filter { $0.hasPrefix("#HERALD_") }.map { $0.dropFirst() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(UUID()).env")
        try values.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try Configuration.load(environment: [:], file: file.path)
    }

    @Test func readmeDocumentsEverySetting() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for setting in Configuration.settings {
            #expect(readme.contains("`\(setting.name)`"), "README.md lacks \(setting.name)")
        }
    }

    /// The unit as systemd reads it: `systemd-analyze verify` must have nothing to say
    /// (it exits 0 even on lines it ignores, so its output is what counts).
    @Test func systemdUnitVerifiesCleanly() async throws {
        let unit = try String(contentsOf: packageRoot.appendingPathComponent("deploy/herald.service"), encoding: .utf8)
        for line in [
            "Type=notify", "WatchdogSec=", "Restart=on-failure", "TimeoutStopSec=90s", "DynamicUser=yes",
            "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "LoadCredential=",
        ] {
            #expect(unit.contains("\n\(line)"), "deploy/herald.service lacks \(line)")
        }
        let analyze = "/usr/bin/systemd-analyze"
        try #require(
            FileManager.default.isExecutableFile(atPath: analyze),
            "systemd-analyze is missing: scripts/test.sh installs systemd")
        // verify checks that ExecStart exists, so point it at the binary just built.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "unit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent("herald.service")
        try unit.replacingOccurrences(of: "/usr/local/bin/herald", with: heraldExecutable.path)
            .write(to: copy, atomically: true, encoding: .utf8)
        let (status, text) = try await runProgram(analyze, ["verify", copy.path])
        #expect(status == 0)
        #expect(text.isEmpty, "systemd-analyze verify: \(text)")
    }
}
