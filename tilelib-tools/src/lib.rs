//! tilelib-tools: the .tilelib container and its tooling.
