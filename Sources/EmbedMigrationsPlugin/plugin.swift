import Foundation
import PackagePlugin

/// Embeds the package's top-level `migrations/*.sql` (the numbered migrations),
/// `migrations/functions/*.sql` (the function files) and `migrations/baseline/` (a new
/// database's schema) into the target being built, as Swift
/// source generated at build time: the `herald` binary carries its schema, and the SQL files
/// stay the only copy in the repository.
@main
struct EmbedMigrationsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let directory = context.package.directoryURL.appending(path: "migrations")
        let migrations = try sqlFiles(in: directory).filter { $0.lastPathComponent.first?.isNumber == true }
        let functionFiles = try sqlFiles(in: directory.appending(path: "functions"))
        let baseline = directory.appending(path: "baseline")
        let baselineFiles = try sqlFiles(in: baseline)
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding migrations/, migrations/functions/ and migrations/baseline/",
                executable: try context.tool(named: "herald-embed-migrations").url,
                // The tool lists the directories itself; they are inputs too, so that adding or
                // removing a file (which changes its directory) runs it again.
                arguments: [output.path, directory.path],
                inputFiles: [directory, directory.appending(path: "functions"), baseline] + migrations + functionFiles
                    + baselineFiles,
                outputFiles: [output])
        ]
    }

    func sqlFiles(in directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }
}
