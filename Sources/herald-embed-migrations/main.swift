import Foundation

// Writes a Swift file declaring `Migration.embedded` from the numbered SQL files of a
// migrations directory, `FunctionFile.embedded` from those of its functions/ and
// `Baseline.embedded` from its baseline/, for the
// EmbedMigrations build plugin: herald-embed-migrations OUTPUT MIGRATIONS_DIRECTORY
//
// It lists the directory itself, each time it runs: the plugin's list is made when the build is
// planned, and an incremental build that kept that plan would miss a file added since.

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: herald-embed-migrations OUTPUT MIGRATIONS_DIRECTORY\n".utf8))
    exit(64)
}
let output = arguments[0]
let directory = URL(fileURLWithPath: arguments[1])

/// The `.sql` files of `directory`, in name order.
func sqlFiles(in directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path)
        .filter { $0.hasSuffix(".sql") }
        .sorted()
        .map { directory.appendingPathComponent($0).path }
}
let migrationPaths = try sqlFiles(in: directory).filter {
    URL(fileURLWithPath: $0).lastPathComponent.first?.isNumber == true
}
let functionPaths = try sqlFiles(in: directory.appendingPathComponent("functions"))

/// The file's text as a Swift raw string literal, delimited by more #s than the SQL ever puts
/// after a quote.
func literal(_ path: String) throws -> String {
    let sql = try String(contentsOfFile: path, encoding: .utf8)
    var hashes = "#"
    while sql.contains("\"" + hashes) { hashes += "#" }
    return "\(hashes)\"\"\"\n" + sql + (sql.hasSuffix("\n") ? "" : "\n") + "\"\"\"\(hashes)"
}

var source = """
    // Generated at build time from migrations/*.sql and migrations/functions/*.sql by the
    // EmbedMigrations plugin.

    extension Migration {
        /// Every migration in `migrations/`, in order.
        public static let embedded: [Migration] = [

    """
for path in migrationPaths {
    let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    guard let version = Int(name.prefix { $0.isNumber }) else {
        FileHandle.standardError.write(Data("\(path): a migration's name starts with its number\n".utf8))
        exit(65)
    }
    source += "        Migration(version: \(version), name: \"\(name)\", sql: \(try literal(path))),\n"
}
source += """
        ]
    }

    extension FunctionFile {
        /// Every function file in `migrations/functions/`, in name order (the order they apply in).
        public static let embedded: [FunctionFile] = [

    """
for path in functionPaths {
    let name = URL(fileURLWithPath: path).lastPathComponent
    source += "        FunctionFile(name: \"\(name)\", sql: \(try literal(path))),\n"
}
source += "    ]\n}\n"

// The baseline's first line says which migration it stands for: "-- The schema after migration N, …".
let tablesPath = directory.appendingPathComponent("baseline/tables.sql").path
let afterPath = directory.appendingPathComponent("baseline/after_functions.sql").path
let firstLine = try String(contentsOfFile: tablesPath, encoding: .utf8).prefix { $0 != "\n" }
guard let range = firstLine.range(of: "after migration "),
    let version = Int(firstLine[range.upperBound...].prefix { $0.isNumber })
else {
    FileHandle.standardError.write(Data("\(tablesPath): the first line names the migration it stands for\n".utf8))
    exit(65)
}
source += """

    extension Baseline {
        /// `migrations/baseline/`, the schema after migration \(version).
        public static let embedded = Baseline(
            version: \(version),
            tables: \(try literal(tablesPath)),
            afterFunctions: \(try literal(afterPath)))
    }

    """
try source.write(toFile: output, atomically: true, encoding: .utf8)
