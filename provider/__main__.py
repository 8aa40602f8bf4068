"""Entry point of the trainjobs component provider (see PulumiPlugin.yaml)."""

from trainjobs.tools.provider.server import serve

if __name__ == "__main__":
    serve()
