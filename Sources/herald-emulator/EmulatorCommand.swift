import ArgumentParser
import Foundation
import HeraldEmulator
import HeraldFCM

/// Runs the FCM v1 + OAuth, APNs and Web Push stand-ins until it is stopped.
@main
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-emulator",
        abstract: "A local stand-in for FCM HTTP v1 with Google's OAuth token endpoint, APNs and a Web Push service.",
        discussion: """
            Point a service account's token_uri at http://127.0.0.1:<port>/token and Herald's FCM endpoint \
            at http://127.0.0.1:<port>. APNs (/3/device/…) and the push service (/push/…) need a TLS and \
            HTTP/2 front, as scripts/lib/nginx-standin.sh makes one. GET /emulator/messages, /emulator/apns \
            and /emulator/web-pushes list what arrived.
            """)

    @Option(help: "Port on 127.0.0.1 (0 picks a free one).") var port: UInt16 = 8085
    @Option(help: "Trust this service-account file's key (repeatable).") var serviceAccount: [String] = []
    @Option(
        help: "Generate a service account whose token_uri is this emulator, write it here (mode 0600) and trust it.")
    var writeServiceAccount: String?
    @Option(help: "The project id of the generated service account.") var project = "herald-demo"

    func run() async throws {
        let emulator = try await Emulator.start(port: port)
        for path in serviceAccount {
            try await emulator.register(try ServiceAccount.load(file: path))
        }
        if let path = writeServiceAccount {
            let account = try await emulator.makeServiceAccount(projectID: project)
            try account.writeFile(to: path)
            say("wrote service account for project \(project) to \(path)")
        }
        say("emulator listening on \(emulator.baseURL) (token URI \(emulator.tokenURI))")
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

/// Writes a line to standard output at once (print is block-buffered when stdout is a pipe).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
