//! Detection on the machine the tests run on.

use hwc_topology::{detect, Sources};

#[test]
fn the_live_machine_is_detected() {
    let topo = detect(&Sources::live());
    assert!(topo.platform.threads >= 1);
    assert_eq!(topo.platform.cpus.len(), topo.platform.threads as usize);
    assert!(topo.platform.numa_nodes >= 1);
    assert_eq!(topo.tools.len(), 9);
}
