// Package precompile fills a wazero compilation cache directory with the machine code of
// standard-Go plugin modules, compiled with the host's settings. wasmtest runs its test
// (as a test binary built without the race detector, which slows wazero's decoder and
// compiler by one to two orders of magnitude) so that race-enabled test binaries load
// those modules from the cache. It is a test binary rather than a command because wazero
// stamps cache entries with its version as seen by the running binary, which is "dev" in
// every test binary and the module version in a command.
package precompile
