"""Entry point of the trainjobs component provider (see PulumiPlugin.yaml)."""

from components.provider import serve

if __name__ == "__main__":
    serve()
