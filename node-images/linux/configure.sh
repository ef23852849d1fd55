#!/bin/sh
# configure.sh runs inside the node rootfs (stage2.sh) after hwk has laid the
# binaries and files/ over it. It enables the node's services and removes
# what must not be shared by every node made from the image.
set -eu

systemctl enable containerd.service kubelet.service hwk-seed.service \
	hwk-growfs-root.service \
	systemd-networkd.service ssh.service >/dev/null
systemctl set-default multi-user.target >/dev/null
# A node has no use for these, and in a container they only fail. No
# logins on the consoles either (root has no password; nodes are reached
# over SSH or the driver): a getty on the serial console would also stop
# systemd printing boot status there, which is how hwk watches a VM boot.
systemctl mask getty@tty1.service serial-getty@.service apt-daily.timer \
	apt-daily-upgrade.timer e2scrub_reap.service >/dev/null 2>&1 || true

# Every node must get its own identity at first boot.
rm -f /etc/ssh/ssh_host_*
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id
echo node >/etc/hostname

# Root logs in with a key only (hwk-seed installs it). The node's one host
# key is the Ed25519 key hwk pins (hwk-seed makes or installs it).
install -d -m 0700 /root/.ssh
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nHostKey /etc/ssh/ssh_host_ed25519_key\n' \
	>/etc/ssh/sshd_config.d/hwk.conf

# kubeadm and the CNI plugins expect these to exist.
mkdir -p /etc/kubernetes/manifests /etc/cni/net.d /opt/cni/bin \
	/var/lib/kubelet /var/lib/hwk

# Nothing below is needed at run time.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log \
	/usr/share/man/* /usr/share/info/* /tmp/* /var/tmp/*
# Keep each package's copyright file: the image is redistributed.
find /usr/share/doc -type f ! -name copyright -delete
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' \
	-exec rm -rf {} +
