/// The files the server serves from inside its binary, so it needs nothing beside it at run time: the API's
/// description and the web dashboard. They live in this folder (`openapi.yaml` and `dashboard/` at the top of the
/// tree are links to them) and SwiftPM compiles them in (`.embedInCode`), so the tree holds one copy.
public enum Assets {
    public static var openAPI: [UInt8] { PackageResources.openapi_yaml }
    public static var dashboardPage: [UInt8] { PackageResources.index_html }
    public static var dashboardScript: [UInt8] { PackageResources.app_js }
    public static var dashboardStyle: [UInt8] { PackageResources.app_css }
}
