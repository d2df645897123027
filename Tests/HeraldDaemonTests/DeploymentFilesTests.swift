import Foundation
import HeraldDaemon
import HeraldTestSupport
import Testing

@Suite struct DeploymentFilesTests {
    @Test func environmentExampleListsEverySettingWithItsDefault() throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("deploy/herald.env"), encoding: .utf8)
        for setting in Configuration.settings {
            let line = text.split(separator: "\n").first { $0.hasPrefix("#\(setting.name)=") }
            #expect(line != nil, "deploy/herald.env lacks \(setting.name)")
            // A default that is a value (not a description in parentheses) is the one written.
            if let line, !setting.defaultValue.hasPrefix("("), !setting.defaultValue.hasPrefix("<") {
                #expect(
                    line == "#\(setting.name)=\(setting.defaultValue)",
                    "deploy/herald.env says \(line), the default is \(setting.defaultValue)")
            }
        }
        // The example's uncommented form must itself be a valid configuration.
        let values = text.split(separator: "\n").filter { $0.hasPrefix("#HERALD_") }.map { $0.dropFirst() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(UUID()).env")
        try values.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try Configuration.load(environment: [:], file: file.path)
    }

    @Test func configurationGuideDocumentsEverySetting() throws {
        let guide = try String(
            contentsOf: packageRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        for setting in Configuration.settings {
            let row = guide.split(separator: "\n").first { $0.hasPrefix("| `\(setting.name)` |") }
            #expect(row != nil, "docs/configuration.md lacks \(setting.name)")
            if let row, !setting.defaultValue.hasPrefix("("), !setting.defaultValue.hasPrefix("<") {
                let column = row.split(separator: "|")[1].trimmingCharacters(in: .whitespaces)
                #expect(
                    column.hasPrefix("`\(setting.defaultValue)`"),
                    "docs/configuration.md gives \(setting.name) the default \(column), not \(setting.defaultValue)")
            }
        }
    }

    /// Every relative link in the README and docs/ names a file that exists.
    @Test func documentationLinksResolve() throws {
        let docs = packageRoot.appendingPathComponent("docs")
        let pages =
            [packageRoot.appendingPathComponent("README.md")]
            + (try FileManager.default.contentsOfDirectory(at: docs, includingPropertiesForKeys: nil))
            .filter { $0.pathExtension == "md" }
        for page in pages {
            let text = try String(contentsOf: page, encoding: .utf8)
            for link in text.matches(of: /\]\(([^)#:]+)(#[^)]*)?\)/) {
                let target = page.deletingLastPathComponent().appendingPathComponent(String(link.1))
                #expect(
                    FileManager.default.fileExists(atPath: target.path),
                    "\(page.lastPathComponent) links to \(link.1), which does not exist")
            }
        }
    }

    /// The unit as systemd reads it: `systemd-analyze verify` must have nothing to say
    /// (it exits 0 even on lines it ignores, so its output is what counts).
    @Test func systemdUnitVerifiesCleanly() async throws {
        let unit = try String(contentsOf: packageRoot.appendingPathComponent("deploy/herald.service"), encoding: .utf8)
        for line in [
            "Type=notify", "WatchdogSec=", "Restart=on-failure", "TimeoutStopSec=90s", "DynamicUser=yes",
            "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "LoadCredential=",
            "LimitNOFILE=65536",
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

/// The monitoring that ships in `deploy/`: Prometheus alert rules and a Grafana dashboard.
@Suite struct MonitoringFilesTests {
    static let rules = packageRoot.appendingPathComponent("deploy/prometheus/herald-alerts.yml")
    static let dashboard = packageRoot.appendingPathComponent("deploy/grafana/herald.json")

    /// promtool from Debian's package, or the copy `scripts/test.sh` extracts into `.tools/`.
    static var promtool: String? {
        ["/usr/bin/promtool", packageRoot.appendingPathComponent(".tools/usr/bin/promtool").path].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// `promtool check rules`, and `promtool test rules`: each alert fires on series that should
    /// fire it, with the summary an operator reads, and stays quiet on healthy ones.
    @Test func alertRulesPassPromtool() async throws {
        let promtool = try #require(Self.promtool, "promtool is missing: scripts/test.sh extracts it into .tools/")
        let check = try await runProgram(promtool, ["check", "rules", Self.rules.path])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("SUCCESS: 10 rules found"), "\(check.output)")
        let test = try await runProgram(
            promtool,
            ["test", "rules", packageRoot.appendingPathComponent("deploy/prometheus/herald-alerts.test.yml").path])
        #expect(test.status == 0, "\(test.output)")
        // Every alert has a unit test that expects it to fire.
        let tests = try String(
            contentsOf: packageRoot.appendingPathComponent("deploy/prometheus/herald-alerts.test.yml"), encoding: .utf8)
        for alert in try Self.alertNames() {
            #expect(tests.contains("alertname: \(alert)\n        exp_alerts:\n          - "), "no test fires \(alert)")
        }
    }

    /// Import-ready: valid JSON, the data source a variable every panel and query uses, and
    /// every panel with at least one query.
    @Test func dashboardIsImportReady() throws {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.dashboard)) as? [String: Any]
        let dashboard = try #require(object)
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        #expect(variables.contains { $0["name"] as? String == "datasource" && $0["type"] as? String == "datasource" })
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        #expect(panels.count >= 8)
        for panel in panels {
            let title = panel["title"] as? String ?? "?"
            #expect((panel["datasource"] as? [String: String])?["uid"] == "${datasource}", "\(title)")
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(!targets.isEmpty, "\(title) has no query")
            for target in targets {
                #expect((target["expr"] as? String)?.isEmpty == false, "\(title)")
                #expect((target["datasource"] as? [String: String])?["uid"] == "${datasource}", "\(title)")
            }
        }
    }

    static func alertNames() throws -> [String] {
        try String(contentsOf: rules, encoding: .utf8).matches(of: /- alert: (\w+)/).map { String($0.1) }
    }

    /// The Herald metrics the dashboard and the alerts query (histogram series by their family).
    static func queriedMetrics() throws -> Set<String> {
        let text = try String(contentsOf: dashboard, encoding: .utf8) + String(contentsOf: rules, encoding: .utf8)
        return Set(
            text.matches(of: /herald_[a-z_]+/).map { match in
                var name = String(match.0)
                for suffix in ["_bucket", "_count", "_sum"] where name.hasSuffix(suffix) {
                    name = String(name.dropLast(suffix.count))
                }
                return name
            })
    }
}
