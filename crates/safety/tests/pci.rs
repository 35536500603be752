//! PCI-level refusals over a sysfs tree built in a temporary folder (the layout of
//! `/sys/bus/pci`, with the links the kernel makes), and the holder scan over a fake `/proc`.

use hwc_safety::holders::open_by;
use hwc_safety::pci::{bind_refusals, BindRefusal, BindRequest, GroupPeer, Sysfs};
use hwc_safety::Pci;
use std::os::unix::fs::symlink;
use std::path::Path;

/// A device under `root/bus/pci/devices`, on `driver`, in IOMMU `group`, of `header` type.
fn device(root: &Path, bdf: &str, driver: Option<&str>, group: Option<&str>, header: u8) {
    let dev = root.join("devices/pci0000:00").join(bdf);
    std::fs::create_dir_all(&dev).unwrap();
    let mut config = vec![0u8; 64];
    config[0x0e] = header | 0x80; // the multi-function bit is not part of the type
    std::fs::write(dev.join("config"), config).unwrap();
    std::fs::write(dev.join("driver_override"), "(null)\n").unwrap();
    std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
    symlink(&dev, root.join("bus/pci/devices").join(bdf)).unwrap();
    if let Some(d) = driver {
        let drv = root.join("bus/pci/drivers").join(d);
        std::fs::create_dir_all(&drv).unwrap();
        symlink(&drv, dev.join("driver")).unwrap();
    }
    if let Some(g) = group {
        let gdir = root.join("kernel/iommu_groups").join(g);
        std::fs::create_dir_all(gdir.join("devices")).unwrap();
        symlink(&dev, gdir.join("devices").join(bdf)).unwrap();
        symlink(&gdir, dev.join("iommu_group")).unwrap();
    }
}

fn vfio() -> BindRequest<'static> {
    BindRequest {
        driver: "vfio-pci",
        allow_no_iommu: false,
    }
}

#[test]
fn a_drive_alone_in_its_group_with_vfio_loaded_may_be_bound() {
    let t = tempfile::tempdir().unwrap();
    device(t.path(), "0000:10:00.0", Some("nvme"), Some("7"), 0);
    // Its root port shares the group: a bridge, which vfio accepts.
    device(t.path(), "0000:00:01.0", Some("pcieport"), Some("7"), 1);
    std::fs::create_dir_all(t.path().join("bus/pci/drivers/vfio-pci")).unwrap();
    let sys = Sysfs {
        root: t.path().into(),
    };
    assert_eq!(sys.driver("0000:10:00.0").unwrap().as_deref(), Some("nvme"));
    assert_eq!(sys.driver_override("0000:10:00.0").unwrap(), None);
    assert_eq!(sys.iommu_group("0000:10:00.0").as_deref(), Some("7"));
    assert!(bind_refusals(&sys, "0000:10:00.0", vfio(), &[]).is_empty());
}

#[test]
fn every_pci_reason_is_given_at_once() {
    let t = tempfile::tempdir().unwrap();
    device(t.path(), "0000:10:00.0", Some("nvme"), Some("3"), 0);
    device(t.path(), "0000:10:00.1", Some("e1000e"), Some("3"), 0);
    device(t.path(), "0000:10:00.2", None, Some("3"), 0);
    device(t.path(), "0000:11:00.0", Some("nvme"), Some("3"), 0);
    device(t.path(), "0000:20:00.0", Some("nvme"), None, 0);
    let sys = Sysfs {
        root: t.path().into(),
    };
    // vfio-pci not loaded, and a NIC in the group; the other NVMe drive of the group is bound
    // in the same run, and the driverless function is acceptable.
    let r = bind_refusals(&sys, "0000:10:00.0", vfio(), &["0000:11:00.0".into()]);
    assert_eq!(
        r,
        vec![
            BindRefusal::GroupShared {
                group: "3".into(),
                peers: vec![GroupPeer {
                    bdf: "0000:10:00.1".into(),
                    driver: Some("e1000e".into()),
                    header_type: Some(0),
                }],
            },
            BindRefusal::DriverNotLoaded {
                driver: "vfio-pci".into()
            },
        ]
    );
    let text: Vec<String> = r.iter().map(ToString::to_string).collect();
    assert!(
        text[0].contains("0000:10:00.1 (driver e1000e)"),
        "{}",
        text[0]
    );
    assert!(text[1].contains("modprobe vfio_pci"), "{}", text[1]);
    // Not bound with it, the other drive blocks too.
    let r = bind_refusals(&sys, "0000:10:00.0", vfio(), &[]);
    assert!(matches!(&r[0], BindRefusal::GroupShared { peers, .. } if peers.len() == 2));
    // No IOMMU group: vfio cannot take it.
    assert_eq!(
        bind_refusals(&sys, "0000:20:00.0", vfio(), &[])[0],
        BindRefusal::NoIommu
    );
    // uio needs the user's consent to run without IOMMU protection, and its module.
    let uio = BindRequest {
        driver: "uio_pci_generic",
        allow_no_iommu: false,
    };
    let r = bind_refusals(&sys, "0000:20:00.0", uio, &[]);
    assert_eq!(r[0], BindRefusal::UnprotectedNotAllowed);
    assert!(r[0].to_string().contains("--allow-no-iommu"));
    let r = bind_refusals(
        &sys,
        "0000:20:00.0",
        BindRequest {
            allow_no_iommu: true,
            ..uio
        },
        &[],
    );
    assert_eq!(
        r,
        vec![BindRefusal::DriverNotLoaded {
            driver: "uio_pci_generic".into()
        }]
    );
    // Only the userspace drivers hwceiling knows.
    assert!(matches!(
        bind_refusals(
            &sys,
            "0000:20:00.0",
            BindRequest {
                driver: "nvme",
                allow_no_iommu: true
            },
            &[]
        )[0],
        BindRefusal::UnknownDriver { .. }
    ));
    assert!(
        sys.driver("0000:99:00.0").is_err(),
        "a device that is not there"
    );
}

#[test]
fn holders_are_found_by_their_descriptors_and_named() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    for (pid, comm, target) in [
        ("4242", "qemu-system-x86", "/dev/nvme0n1"),
        ("77", "smartd", "/dev/nvme0"),
        ("88", "bash", "/dev/pts/0"),
    ] {
        std::fs::create_dir_all(p.join(pid).join("fd")).unwrap();
        std::fs::write(p.join(pid).join("comm"), format!("{comm}\n")).unwrap();
        symlink(target, p.join(pid).join("fd/3")).unwrap();
    }
    std::fs::create_dir_all(p.join("self")).unwrap();
    let h = open_by(p, &["/dev/nvme0".into(), "/dev/nvme0n1".into()]);
    let text: Vec<String> = h.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "smartd (pid 77) has /dev/nvme0 open",
            "qemu-system-x86 (pid 4242) has /dev/nvme0n1 open"
        ]
    );
    assert!(open_by(p, &["/dev/nvme1".into()]).is_empty());
}
