//! PCI devices through sysfs: which driver holds a device, moving it to another driver, and
//! whether a device may be handed to a userspace driver (its IOMMU group, the driver's module).
//!
//! The kernel's rule for vfio (`vfio_dev_driver_allowed`, drivers/vfio/group.c): every device of
//! an IOMMU group must be bound to a vfio driver, to `pci-stub`, to no driver, or be a bridge
//! (a PCI header type other than 0), or the group cannot be opened. A group that fails this is
//! refused before anything is unbound, naming its devices.

use std::io;
use std::path::{Path, PathBuf};

/// vfio-pci: the userspace driver behind the IOMMU.
pub const VFIO_PCI: &str = "vfio-pci";
/// uio_pci_generic: a userspace driver without IOMMU protection (the device may DMA anywhere).
pub const UIO_PCI_GENERIC: &str = "uio_pci_generic";

/// What sysfs tells about one PCI device.
pub trait Pci {
    /// The driver bound to `bdf`, or `None`.
    fn driver(&self, bdf: &str) -> io::Result<Option<String>>;
    /// The device's `driver_override`, or `None` when unset.
    fn driver_override(&self, bdf: &str) -> io::Result<Option<String>>;
    fn set_driver_override(&self, bdf: &str, driver: Option<&str>) -> io::Result<()>;
    /// Unbind `bdf` from the driver it has (nothing when it has none).
    fn unbind(&self, bdf: &str) -> io::Result<()>;
    /// Ask the kernel to bind `bdf` to the driver that matches it (`drivers_probe`).
    fn probe(&self, bdf: &str) -> io::Result<()>;
    /// Bind `bdf` to `driver` explicitly (`drivers/DRIVER/bind`).
    fn bind(&self, bdf: &str, driver: &str) -> io::Result<()>;
}

/// The live sysfs under `root` (`/sys` on a machine; a copy in tests of the read-only parts).
#[derive(Debug, Clone)]
pub struct Sysfs {
    pub root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/sys"),
        }
    }
}

impl Sysfs {
    pub fn device(&self, bdf: &str) -> PathBuf {
        self.root.join("bus/pci/devices").join(bdf)
    }

    /// Whether `driver` is registered with the PCI bus (its module is loaded).
    pub fn driver_registered(&self, driver: &str) -> bool {
        self.root.join("bus/pci/drivers").join(driver).is_dir()
    }

    /// The IOMMU group number of `bdf`, or `None` when the device has no IOMMU group (no IOMMU,
    /// or it is off).
    pub fn iommu_group(&self, bdf: &str) -> Option<String> {
        let link = std::fs::read_link(self.device(bdf).join("iommu_group")).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }

    /// The other devices of `bdf`'s IOMMU group, with their drivers and header types.
    pub fn group_peers(&self, bdf: &str) -> io::Result<Vec<GroupPeer>> {
        let dir = self.device(bdf).join("iommu_group/devices");
        let mut peers = Vec::new();
        for e in std::fs::read_dir(&dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if name == bdf {
                continue;
            }
            peers.push(GroupPeer {
                driver: self.driver(&name)?,
                header_type: self.header_type(&name),
                bdf: name,
            });
        }
        peers.sort_by(|a, b| a.bdf.cmp(&b.bdf));
        Ok(peers)
    }

    /// The PCI header type (config byte 0x0e, without the multi-function bit), when readable.
    fn header_type(&self, bdf: &str) -> Option<u8> {
        let config = std::fs::read(self.device(bdf).join("config")).ok()?;
        config.get(0x0e).map(|b| b & 0x7f)
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        std::fs::write(path, value).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("writing {value:?} to {}: {e}", path.display()),
            )
        })
    }
}

impl Pci for Sysfs {
    fn driver(&self, bdf: &str) -> io::Result<Option<String>> {
        match std::fs::read_link(self.device(bdf).join("driver")) {
            Ok(l) => Ok(l.file_name().map(|n| n.to_string_lossy().into_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if self.device(bdf).exists() {
                    Ok(None)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("no PCI device {bdf}"),
                    ))
                }
            }
            Err(e) => Err(e),
        }
    }

    fn driver_override(&self, bdf: &str) -> io::Result<Option<String>> {
        let text = std::fs::read_to_string(self.device(bdf).join("driver_override"))?;
        let v = text.trim();
        Ok((!v.is_empty() && v != "(null)").then(|| v.to_string()))
    }

    fn set_driver_override(&self, bdf: &str, driver: Option<&str>) -> io::Result<()> {
        // A newline alone clears the override.
        self.write(
            &self.device(bdf).join("driver_override"),
            &format!("{}\n", driver.unwrap_or("")),
        )
    }

    fn unbind(&self, bdf: &str) -> io::Result<()> {
        if self.driver(bdf)?.is_none() {
            return Ok(());
        }
        self.write(&self.device(bdf).join("driver/unbind"), bdf)
    }

    fn probe(&self, bdf: &str) -> io::Result<()> {
        self.write(&self.root.join("bus/pci/drivers_probe"), bdf)
    }

    fn bind(&self, bdf: &str, driver: &str) -> io::Result<()> {
        self.write(
            &self.root.join("bus/pci/drivers").join(driver).join("bind"),
            bdf,
        )
    }
}

/// Another device of a drive's IOMMU group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPeer {
    pub bdf: String,
    pub driver: Option<String>,
    /// PCI header type: 0 an endpoint, 1 a bridge, 2 a CardBus bridge; `None` unreadable.
    pub header_type: Option<u8>,
}

impl GroupPeer {
    /// Whether vfio accepts this device in the group of a device it opens.
    pub fn viable(&self, also_bound: &[String]) -> bool {
        also_bound.contains(&self.bdf)
            || matches!(self.header_type, Some(t) if t != 0)
            || matches!(
                self.driver.as_deref(),
                None | Some(VFIO_PCI) | Some("pci-stub")
            )
    }
}

impl std::fmt::Display for GroupPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (driver {})",
            self.bdf,
            self.driver.as_deref().unwrap_or("none")
        )
    }
}

/// Why a device may not be handed to a userspace driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindRefusal {
    /// vfio-pci needs an IOMMU, and the device has no IOMMU group.
    NoIommu,
    /// The driver's module is not loaded.
    DriverNotLoaded { driver: String },
    /// Another device of its IOMMU group is bound to a driver vfio does not accept there.
    GroupShared {
        group: String,
        peers: Vec<GroupPeer>,
    },
    /// uio_pci_generic was asked for without the flag that accepts no IOMMU protection.
    UnprotectedNotAllowed,
    /// The driver is not one hwceiling binds (vfio-pci, uio_pci_generic).
    UnknownDriver { driver: String },
    /// sysfs could not be read.
    Unreadable(String),
}

impl std::fmt::Display for BindRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindRefusal::NoIommu => f.write_str(
                "it has no IOMMU group, so vfio-pci cannot take it (turn the IOMMU on: \
                 intel_iommu=on or amd_iommu=on on the kernel command line, and VT-d/AMD-Vi in \
                 the firmware)",
            ),
            BindRefusal::DriverNotLoaded { driver } => {
                let module = driver.replace('-', "_");
                write!(f, "the {driver} driver is not loaded (modprobe {module})")
            }
            BindRefusal::GroupShared { group, peers } => {
                let p: Vec<String> = peers.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "its IOMMU group {group} also holds {}, which would have to leave its driver too",
                    p.join(", ")
                )
            }
            BindRefusal::UnprotectedNotAllowed => write!(
                f,
                "{UIO_PCI_GENERIC} gives the drive DMA to all of memory (no IOMMU protection): \
                 accept that with --allow-no-iommu"
            ),
            BindRefusal::UnknownDriver { driver } => write!(
                f,
                "{driver} is not a userspace driver hwceiling binds ({VFIO_PCI}, {UIO_PCI_GENERIC})"
            ),
            BindRefusal::Unreadable(e) => write!(f, "its sysfs entries could not be read ({e})"),
        }
    }
}

/// How a device is to be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindRequest<'a> {
    pub driver: &'a str,
    /// The user accepted a driver without IOMMU protection.
    pub allow_no_iommu: bool,
}

/// Every PCI-level reason not to hand `bdf` to `req.driver`; `also_bound` are the other devices
/// bound in the same run (they leave their drivers too, so they do not block a shared group).
/// The data-level reasons (mounted, partitioned, held, signed) are the write gate's.
pub fn bind_refusals(
    sys: &Sysfs,
    bdf: &str,
    req: BindRequest<'_>,
    also_bound: &[String],
) -> Vec<BindRefusal> {
    let mut r = Vec::new();
    match req.driver {
        VFIO_PCI => match sys.iommu_group(bdf) {
            None => r.push(BindRefusal::NoIommu),
            Some(group) => match sys.group_peers(bdf) {
                Ok(peers) => {
                    let blocking: Vec<GroupPeer> = peers
                        .into_iter()
                        .filter(|p| !p.viable(also_bound))
                        .collect();
                    if !blocking.is_empty() {
                        r.push(BindRefusal::GroupShared {
                            group,
                            peers: blocking,
                        });
                    }
                }
                Err(e) => r.push(BindRefusal::Unreadable(e.to_string())),
            },
        },
        UIO_PCI_GENERIC => {
            if !req.allow_no_iommu {
                r.push(BindRefusal::UnprotectedNotAllowed);
            }
        }
        other => {
            r.push(BindRefusal::UnknownDriver {
                driver: other.to_string(),
            });
            return r;
        }
    }
    if !sys.driver_registered(req.driver) {
        r.push(BindRefusal::DriverNotLoaded {
            driver: req.driver.to_string(),
        });
    }
    r
}
