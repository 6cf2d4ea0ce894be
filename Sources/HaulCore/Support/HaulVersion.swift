/// Haul's version: `haul --version`, the spec's `info.version` (a test compares them) and the image's label.
public enum HaulVersion {
    public static let current = "0.1.0"
}
