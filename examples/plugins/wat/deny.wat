;; A validating plugin that refuses every request it sees (the tenant lock-out attack of docs/multi-tenancy.md).
(module
  (import "wasmplane" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  ;; A bump allocator is enough: the host reuses its input buffer across calls.
  (global $heap (mut i32) (i32.const 4096))
  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))
  (func (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  ;; (ptr << 32) | len
  (func $pack (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32)) (i64.extend_i32_u (local.get $n))))
  ;; A hook that always answers well, so tests can show the plugin still serves after a fault.
  (data (i32.const 64) "{\"authenticated\":false}")
  (func (export "authenticate") (param i32 i32) (result i64) (call $pack (i32.const 64) (i32.const 23)))
  (data (i32.const 128) "{\"allowed\":false,\"message\":\"denied by deny-all\"}")
  (func (export "validate") (param i32 i32) (result i64) (call $pack (i32.const 128) (i32.const 48)))
)
