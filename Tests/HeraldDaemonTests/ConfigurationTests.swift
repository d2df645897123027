import Foundation
import HeraldDaemon
import Testing

@Suite struct ConfigurationTests {
    @Test func defaultsApplyWhenNothingIsSet() throws {
        let configuration = try Configuration.load(environment: [:])
        #expect(configuration.databaseURL == "")
        #expect(configuration.batchSize == 500)
        #expect(configuration.lease == .seconds(60))
        #expect(configuration.pollInterval == .seconds(2))
        #expect(configuration.workers == ["all"])
    }

    @Test func aRenamedSettingIsStillReadUnderItsFormerName() throws {
        let former = try Configuration.load(environment: ["HERALD_FCM_CA_BUNDLE": "/etc/ssl/old.pem"])
        #expect(former.caBundle == "/etc/ssl/old.pem")
        let both = try Configuration.load(
            environment: ["HERALD_FCM_CA_BUNDLE": "/etc/ssl/old.pem", "HERALD_CA_BUNDLE": "/etc/ssl/new.pem"])
        #expect(both.caBundle == "/etc/ssl/new.pem")
    }

    @Test func environmentOverridesTheFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(UUID()).env")
        try """
        # comment
        HERALD_DATABASE_URL="host=db dbname=app"
        HERALD_BATCH_SIZE=50
        HERALD_LEASE=90s

        HERALD_POLL_INTERVAL=500ms
        """.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let configuration = try Configuration.load(
            environment: ["HERALD_CONFIG": file.path, "HERALD_BATCH_SIZE": "200", "PATH": "/bin"])
        #expect(configuration.databaseURL == "host=db dbname=app")
        #expect(configuration.batchSize == 200)
        #expect(configuration.lease == .seconds(90))
        #expect(configuration.pollInterval == .milliseconds(500))
    }

    @Test(arguments: [
        ("HERALD_BATCH_SIZE", "lots", "HERALD_BATCH_SIZE \"lots\" is not a whole number from 1 to 10000"),
        ("HERALD_BATCH_SIZE", "0", "HERALD_BATCH_SIZE \"0\" is not a whole number from 1 to 10000"),
        ("HERALD_LEASE", "soon", "HERALD_LEASE \"soon\" is not a duration such as 500ms, 2s, 5m or 1h"),
        ("HERALD_LEASE", "0.5s", "HERALD_LEASE must be at least 1s"),
        ("HERALD_LOG_LEVEL", "loud", "HERALD_LOG_LEVEL \"loud\" is not a log level"),
        ("HERALD_AUTO_MIGRATE", "perhaps", "HERALD_AUTO_MIGRATE \"perhaps\" is not true or false"),
        ("HERALD_BATCHSIZE", "10", "HERALD_BATCHSIZE is not a Herald setting"),
        ("HERALD_PARTITION_INTERVAL", "500ms", "HERALD_PARTITION_INTERVAL must be at least 1s"),
        (
            "HERALD_PARTITION_INTERVAL", "1h",
            "HERALD_PARTITION_INTERVAL must be at least a 30th of HERALD_RETENTION (168h)"
        ),
    ])
    func badValuesNameTheSetting(name: String, value: String, message: String) {
        #expect {
            try Configuration.load(environment: [name: value])
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test func unknownWorkerIsAConfigurationError() {
        #expect {
            try WorkerCatalog.factories(for: ["sleep", "dispatcher"])
        } throws: { error in
            "\(error)".contains("HERALD_WORKERS names an unknown worker \"dispatcher\"")
        }
    }
}
