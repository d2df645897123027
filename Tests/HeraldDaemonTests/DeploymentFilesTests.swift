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
}
