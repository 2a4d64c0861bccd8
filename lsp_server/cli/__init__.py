"""The `fastcomplete` command: serve, complete, eval, demo, doctor and models. The top of the
house: it may import everything, the build pipeline (models/) included."""
