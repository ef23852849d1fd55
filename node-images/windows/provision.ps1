# hwk's Windows node image: provisioning, run inside the guest during
# `hwk node-image build windows`. The first automatic logon after Setup
# runs it from the build disk (volume label HWKSEED); it carries on across
# its restarts as a startup task, and ends with sysprep, which generalizes
# the disk and powers the machine off. The host sees progress and the
# outcome on the first serial port ("hwk-provision: ..." lines).
#
# The build disk holds everything; the guest downloads nothing:
#   build.json                  versions and image names (written by hwk)
#   bin\containerd\             containerd.exe, ctr.exe, containerd-shim-runhcs-v1.exe
#   bin\crictl.exe
#   bin\k\                      kubelet.exe, kubeadm.exe, hwk-kubelet.exe
#   bin\hwk-seed.exe
#   openssh\OpenSSH-Win64\      Win32-OpenSSH, for releases without sshd built in
#   images\*.tar                container images (pause, Calico, kube-proxy)
#   updates\                    Windows updates (.msu, .cab) to install, in
#                               build.json's order (hwk's --updates)
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'

$work = 'C:\hwk\build'
$phaseFile = 'C:\hwk\provision.phase'
$taskName = 'hwk-provision'

function Say([string]$message) {
    $line = "hwk-provision: $message"
    Microsoft.PowerShell.Utility\Write-Output $line
    # The serial console is how the host follows the build.
    try {
        $port = Microsoft.PowerShell.Utility\New-Object System.IO.Ports.SerialPort 'COM1', 115200
        $port.Open()
        $port.WriteLine($line)
        $port.Close()
    } catch {
        Microsoft.PowerShell.Utility\Write-Output "hwk-provision: (no serial port: $($_.Exception.Message))"
    }
}

# Invoke-Native runs a program's command and fails on its exit status.
# The command runs under 'Continue': this script runs without a console,
# where Windows PowerShell captures a program's stderr, each line an error
# record, and under 'Stop' the first one would end the script before the
# exit status is read (PowerShell/PowerShell #3996, #4002). $ok are the
# statuses that mean success: DISM ends a change that needs a restart with
# 3010 (ERROR_SUCCESS_REBOOT_REQUIRED) or 1641 (ERROR_SUCCESS_REBOOT_INITIATED),
# which phase 1 restarts for anyway.
function Invoke-Native([string]$what, [scriptblock]$command, [int[]]$ok = @(0)) {
    $ErrorActionPreference = 'Continue'
    & $command
    if ($ok -notcontains $LASTEXITCODE) {
        throw "$what exited with status $LASTEXITCODE"
    }
}

# DISM's statuses for a change that is done but waits for a restart.
$dismDone = @(0, 3010, 1641)

function Get-Phase {
    if (Microsoft.PowerShell.Management\Test-Path -LiteralPath $phaseFile) {
        return [int](Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $phaseFile).Trim()
    }
    return 1
}

function Set-Phase([int]$phase) {
    Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath $phaseFile -Value $phase
}

# New-RegistryKey makes a registry key and its missing parents, leaving a
# key that exists as it is: New-Item -Force would delete it first, values
# and subkeys (PowerShell's RegistryProvider.NewItem), and some of these
# keys hold Windows' own settings (Known Issue Rollback overrides).
function New-RegistryKey([string]$path) {
    if (-not (Microsoft.PowerShell.Management\Test-Path -LiteralPath $path)) {
        New-RegistryKey (Microsoft.PowerShell.Management\Split-Path -Parent $path)
        Microsoft.PowerShell.Management\New-Item -Path $path | Microsoft.PowerShell.Core\Out-Null
    }
}

# Both startup tasks must run on a laptop on battery too: Hyper-V passes
# the host's battery to its guests, and Task Scheduler's defaults neither
# start a task on battery nor keep it running when the power goes
# (New-ScheduledTaskSettingsSet). No idle or network condition either.
function New-TaskSettings([int]$hours) {
    ScheduledTasks\New-ScheduledTaskSettingsSet -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries `
        -ExecutionTimeLimit (Microsoft.PowerShell.Utility\New-TimeSpan -Hours $hours)
}

# Clear-ReadOnly clears the read-only attribute of every file under
# $path. Windows' CD file system marks every file of a CD read-only
# (cdfs strucsup.c: "We always start with the read-only bit"), and
# Copy-Item keeps the attribute (CopyFile, Remarks), so everything copied
# from the build disk would stay read-only: OpenSSH's installer rewrites
# one of its files, sshd copies sshd_config_default to sshd_config, and
# a later update of a binary replaces it.
# Add-FirewallRule allows inbound $protocol $port on every network
# profile: a node's network (a static address, no domain) is Public. A
# rule of the name that is there already (Windows' own OpenSSH rule, or
# this build's before a restart) is enabled for every profile: Windows
# Server 2025's preinstalled OpenSSH-Server-In-TCP is for Domain and
# Private only (OpenNebula/one-apps#345).
function Add-FirewallRule([string]$name, [string]$display, [string]$protocol, [int]$port) {
    if (NetSecurity\Get-NetFirewallRule -Name $name -ErrorAction SilentlyContinue) {
        NetSecurity\Set-NetFirewallRule -Name $name -Enabled True -Profile Any
    } else {
        NetSecurity\New-NetFirewallRule -Name $name -DisplayName $display -Protocol $protocol -LocalPort $port -Action Allow -Enabled True -Profile Any | Microsoft.PowerShell.Core\Out-Null
    }
}

function Clear-ReadOnly([string]$path) {
    Microsoft.PowerShell.Management\Get-ChildItem -LiteralPath $path -Recurse -File -Force |
        Microsoft.PowerShell.Core\ForEach-Object { $_.IsReadOnly = $false }
}

# Install-OpenSSH runs Win32-OpenSSH's install-sshd.ps1 in a process of
# its own: it sets 'Stop' and StrictMode for itself, and its exit status
# says how it went. A failure after it made the sshd service (its last
# steps add to the machine's Path and set the services' privileges) is
# reported and passed; one before (wevtutil registering the event
# manifest, the services themselves) ends the build.
function Install-OpenSSH([string]$dir) {
    $ErrorActionPreference = 'Continue'
    $out = powershell.exe -NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass -File "$dir\install-sshd.ps1" 2>&1 | Microsoft.PowerShell.Utility\Out-String
    $status = $LASTEXITCODE
    Microsoft.PowerShell.Utility\Write-Output $out
    if ($status -ne 0) {
        if (-not (Microsoft.PowerShell.Management\Get-Service -Name sshd -ErrorAction SilentlyContinue)) {
            throw "install-sshd.ps1 exited with status $status and made no sshd service: $out"
        }
        Say "phase 2: install-sshd.ps1 exited with status $status, but the sshd service is there; going on (its output is in C:\hwk-provision.log)"
    }
}

# Install-Updates installs build.json's updates with DISM, online, in
# the order the host gave (`hwk node-image build windows --updates`:
# file-name order), each once: a marker file beside each says it is
# done. DISM's status decides:
#   - 0: installed;
#   - 3010, ERROR_SUCCESS_REBOOT_REQUIRED ("The requested operation is
#     successful. Changes will not be effective until the system is
#     rebooted.", Microsoft's System Error Codes 1700-3999), or 1641,
#     ERROR_SUCCESS_REBOOT_INITIATED: installed once Windows restarts.
#     The machine restarts here, and the startup task runs phase 1 again
#     after it, which goes on with the next update: one update a boot,
#     so each finds the servicing stack the one before installed;
#   - 0x800f081e (-2146498530), CBS_E_NOT_APPLICABLE ("the package is
#     not applicable", cbsapi.h; DISM's log: "The package is not
#     applicable to the image."): another release's update, or one older
#     than what is installed. Reported, and the build goes on;
#   - anything else ends the build with the status and DISM's log.
# Since February 2021 Microsoft ships the servicing stack update inside
# the cumulative update, one package in the Update Catalog ("Servicing
# stack updates", Windows deployment docs), which covers every Windows
# Server 2022 update: its latest cumulative update alone brings it up to
# date. DISM reads a package from a read-only file: the copies need no
# more than Clear-ReadOnly gives them.
function Install-Updates {
    $notApplicable = -2146498530 # 0x800f081e, CBS_E_NOT_APPLICABLE
    $cfg = Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath "$work\build.json" | Microsoft.PowerShell.Utility\ConvertFrom-Json
    foreach ($update in $cfg.updates) {
        $file = "$work\updates\$($update.file)"
        if (Microsoft.PowerShell.Management\Test-Path -LiteralPath "$file.done") {
            continue
        }
        Say "phase 1: installing update $($update.name)"
        # 'Continue': DISM's errors on stderr must not end the script
        # before its status is read (see Invoke-Native).
        $ErrorActionPreference = 'Continue'
        $out = dism.exe /online /add-package "/packagepath:$file" /quiet /norestart 2>&1 | Microsoft.PowerShell.Utility\Out-String
        $status = $LASTEXITCODE
        $ErrorActionPreference = 'Stop'
        Microsoft.PowerShell.Utility\Write-Output $out
        if ($status -eq 0) {
            Say "phase 1: update $($update.name) installed"
        } elseif ($status -eq 3010 -or $status -eq 1641) {
            Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath "$file.done" -Value $status
            Say "phase 1: update $($update.name) installed; restarting to finish it"
            Microsoft.PowerShell.Management\Restart-Computer -Force
            exit 0
        } elseif ($status -eq $notApplicable) {
            Say "phase 1: update $($update.name) does not apply to this Windows (0x800f081e, CBS_E_NOT_APPLICABLE); going on without it"
        } elseif ($status -eq -2146498525) {
            throw "DISM could not install update $($update.name): it needs a newer servicing stack first (0x800f0823, CBS_E_NEW_SERVICING_STACK_REQUIRED); add that servicing stack update to --updates, named so that it sorts before this one. DISM's log is C:\Windows\Logs\DISM\dism.log"
        } else {
            throw "DISM could not install update $($update.name) (DISM's /add-package exited with status $status); its log is C:\Windows\Logs\DISM\dism.log"
        }
        Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath "$file.done" -Value $status
    }
    # Updates that all passed as not applicable are a wrong download, not
    # a patched image: say so now, not with an RTM image at the end.
    $applied = 0
    foreach ($update in $cfg.updates) {
        $status = Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath "$work\updates\$($update.file).done"
        if ($status.Trim() -ne "$notApplicable") {
            $applied = $applied + 1
        }
    }
    if (@($cfg.updates).Count -gt 0 -and $applied -eq 0) {
        throw "none of the updates given (--updates) applies to this Windows: take the cumulative update for this release from the Microsoft Update Catalog (Windows Server 2022: 'Cumulative Update for Microsoft server operating system version 21H2 for x64-based Systems')"
    }
}

# Phase 1: copy the build disk, install the updates (restarting for
# them), keep Windows from changing under the build, enable the features
# containers need, restart.
function Invoke-Phase1 {
    # An update's restart runs phase 1 again: the build disk is copied
    # once, and the copy says so.
    $copied = "$work\copied"
    if (-not (Microsoft.PowerShell.Management\Test-Path -LiteralPath $copied)) {
        $seed = (Storage\Get-Volume -FileSystemLabel 'HWKSEED' | Microsoft.PowerShell.Utility\Select-Object -First 1).DriveLetter
        if (-not $seed) {
            throw 'the build disk (HWKSEED) is not attached'
        }
        Say "phase 1: copying the build disk ($($seed):) to $work"
        Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $work | Microsoft.PowerShell.Core\Out-Null
        Microsoft.PowerShell.Management\Copy-Item -Recurse -Force -Path "$($seed):\*" -Destination $work
        Clear-ReadOnly $work

        # The rest runs at startup as SYSTEM, across restarts.
        $action = ScheduledTasks\New-ScheduledTaskAction -Execute 'powershell.exe' `
            -Argument "-NoLogo -NoProfile -ExecutionPolicy Bypass -File $work\provision.ps1"
        $trigger = ScheduledTasks\New-ScheduledTaskTrigger -AtStartup
        ScheduledTasks\Register-ScheduledTask -TaskName $taskName -Action $action -Trigger $trigger -Settings (New-TaskSettings 4) -User 'SYSTEM' -RunLevel Highest -Force | Microsoft.PowerShell.Core\Out-Null
        Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath $copied -Value $seed
    }

    # Before Windows Update's service is disabled (nobody here has seen
    # DISM install an .msu without it), and so that the rest of phase 1
    # runs on the updated Windows.
    Install-Updates

    Say 'phase 1: turning Windows Update off'
    # A node image is rebuilt, not patched in place; an update during a
    # cluster's life would restart the node under its pods.
    $au = 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU'
    New-RegistryKey $au
    Microsoft.PowerShell.Management\New-ItemProperty -Force -Path $au -Name NoAutoUpdate -PropertyType DWord -Value 1 | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Set-Service -Name wuauserv -StartupType Disabled
    Microsoft.PowerShell.Management\Stop-Service -Name wuauserv -Force -ErrorAction SilentlyContinue

    Say 'phase 1: registry settings for container networking'
    $overrides = 'HKLM:\SYSTEM\CurrentControlSet\Policies\Microsoft\FeatureManagement\Overrides'
    New-RegistryKey $overrides
    $build = [Environment]::OSVersion.Version.Build
    if ($build -eq 20348) {
        # Windows Server 2022 after the April 2025 update breaks HNS
        # overlay networking unless this feature is held back
        # (kubernetes-sigs/image-builder #1798).
        Microsoft.PowerShell.Management\New-ItemProperty -Force -Path $overrides -Name 1114842764 -PropertyType DWord -Value 0 | Microsoft.PowerShell.Core\Out-Null
    }
    if ($build -ge 26100) {
        # Windows Server 2025's overlay networking fix is behind this
        # feature flag (kubernetes-sigs/image-builder 0ed6c7c5b).
        Microsoft.PowerShell.Management\New-ItemProperty -Force -Path $overrides -Name 520997518 -PropertyType DWord -Value 1 | Microsoft.PowerShell.Core\Out-Null
    }
    # Keep ephemeral ports out of the range Kubernetes services use
    # (image-builder's systemprep role).
    Invoke-Native 'netsh' { netsh.exe int ipv4 set dynamicportrange tcp 34000 31536 }
    # Enabling Hyper-V disturbs networking while Windows boots; WinRM,
    # started late, is then not stuck (image-builder's systemprep role).
    Invoke-Native 'sc.exe config winrm' { sc.exe config winrm start= delayed-auto }

    Say 'phase 1: enabling the Containers feature and Hyper-V networking'
    Dism\Enable-WindowsOptionalFeature -Online -FeatureName Containers -All -NoRestart | Microsoft.PowerShell.Core\Out-Null
    # Calico's HNS network needs the Hyper-V virtual switch, not the
    # hypervisor: enable the role and its PowerShell module, then turn the
    # hypervisor part off last, so no nested virtualization is needed and
    # no later -All can turn it on again (sig-windows-tools
    # Install-Containerd.ps1, -skipHypervisorSupportCheck, in that order).
    Invoke-Native 'dism enable Hyper-V' { dism.exe /online /enable-feature /featurename:Microsoft-Hyper-V /all /NoRestart } $dismDone
    # -All: the feature's parents (the management tools) come with it;
    # without them DISM refuses it.
    Dism\Enable-WindowsOptionalFeature -Online -FeatureName Microsoft-Hyper-V-Management-PowerShell -All -NoRestart | Microsoft.PowerShell.Core\Out-Null
    Invoke-Native 'dism disable Hyper-V-Online' { dism.exe /online /disable-feature /featurename:Microsoft-Hyper-V-Online /NoRestart } $dismDone

    Set-Phase 2
    Say 'phase 1: done, restarting'
    Microsoft.PowerShell.Management\Restart-Computer -Force
}

# Phase 2: containerd, the kubelet, images, SSH, first boot; then sysprep.
function Invoke-Phase2 {
    $cfg = Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath "$work\build.json" | Microsoft.PowerShell.Utility\ConvertFrom-Json
    # The build Windows runs, with its revision (UBR) after the updates
    # and their restarts: the host records it in the image's manifest.
    # Microsoft's "Windows container version compatibility" reads the
    # host's version from this key.
    $nt = Microsoft.PowerShell.Management\Get-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
    Say "phase 2: Windows Server $($cfg.windowsVersion) build $($nt.CurrentBuildNumber).$($nt.UBR), Kubernetes $($cfg.kubernetesVersion), containerd $($cfg.containerdVersion)"

    Say 'phase 2: containerd'
    $ctrd = "$env:ProgramFiles\containerd"
    Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $ctrd, 'C:\opt\cni\bin', 'C:\etc\cni\net.d', 'C:\var\log\containerd' | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Copy-Item -Force -Path "$work\bin\containerd\*.exe", "$work\bin\crictl.exe" -Destination $ctrd
    $config = Invoke-Native 'containerd config default' { & "$ctrd\containerd.exe" config default } | Microsoft.PowerShell.Utility\Out-String
    # Calico's CNI installs into the directories its Windows DaemonSet
    # names (c:\opt\cni\bin, c:\etc\cni\net.d); the sandbox image is pinned
    # so the kubelet's image GC never removes it.
    $config = $config -replace "(?m)^(\s*)bin_dirs\s*=.*$", "`$1bin_dirs = ['c:/opt/cni/bin']"
    $config = $config -replace "(?m)^(\s*)conf_dir\s*=.*$", "`$1conf_dir = 'c:/etc/cni/net.d'"
    $config = $config -replace "(?m)^(\s*)sandbox\s*=.*$", "`$1sandbox = '$($cfg.pauseImage)'"
    Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath "$ctrd\config.toml" -Value $config -Encoding ascii
    # Phase 2 runs again from the top if the machine restarts during it:
    # what it makes once, it makes only when missing.
    if (-not (Microsoft.PowerShell.Management\Get-Service -Name containerd -ErrorAction SilentlyContinue)) {
        Invoke-Native 'containerd --register-service' {
            & "$ctrd\containerd.exe" --register-service --config "$ctrd\config.toml" --log-file 'C:\var\log\containerd\containerd.log'
        }
    }
    Microsoft.PowerShell.Management\Set-Service -Name containerd -StartupType Automatic
    Microsoft.PowerShell.Management\Start-Service -Name containerd
    [Environment]::SetEnvironmentVariable('CONTAINER_RUNTIME_ENDPOINT', 'npipe:\\.\pipe\containerd-containerd', 'Machine')
    $path = [Environment]::GetEnvironmentVariable('Path', 'Machine')
    if (-not ($path -split ';' -contains 'C:\k')) {
        [Environment]::SetEnvironmentVariable('Path', "$path;$ctrd;C:\k", 'Machine')
    }

    Say 'phase 2: the kubelet'
    Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path 'C:\k', 'C:\var\log\kubelet', 'C:\var\lib\kubelet\etc\kubernetes\manifests', 'C:\etc\kubernetes\pki' | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Copy-Item -Force -Path "$work\bin\k\*.exe" -Destination 'C:\k'
    # hwk-kubelet reads kubeadm's flags at each start; it runs only once
    # kubeadm join has configured the node.
    if (-not (Microsoft.PowerShell.Management\Get-Service -Name kubelet -ErrorAction SilentlyContinue)) {
        Invoke-Native 'sc.exe create kubelet' { sc.exe create kubelet binPath= 'C:\k\hwk-kubelet.exe' start= demand depend= containerd DisplayName= 'Kubernetes kubelet' }
    }
    Invoke-Native 'sc.exe failure kubelet' { sc.exe failure kubelet reset= 0 actions= restart/5000/restart/5000/restart/5000 }
    # hwk-kubelet ends with SERVICE_STOPPED and a non-zero exit code when
    # the kubelet dies, which the recovery actions above cover only with
    # the failure-actions flag set (SERVICE_FAILURE_ACTIONS_FLAG).
    Invoke-Native 'sc.exe failureflag kubelet' { sc.exe failureflag kubelet 1 }
    Add-FirewallRule kubelet 'kubelet (hwk)' TCP 10250
    Add-FirewallRule calico-vxlan 'Calico VXLAN (hwk)' UDP 4789

    Say 'phase 2: Microsoft Defender exclusions'
    # Real-time scanning of every layer containerd unpacks and every file
    # the kubelet writes slows pulls and pod starts, and has locked
    # snapshot files in use. image-builder excludes containerd.exe and
    # ctr.exe (images/capi/ansible/windows/roles/runtimes/tasks/
    # containerd.yml); AKS also kubelet.exe, the runhcs shim and the
    # snapshots directory (Azure/AgentBaker staging/cse/windows/
    # kubernetesfunc.ps1, Update-DefenderPreferences). hwk excludes those
    # processes' files and the directories of containerd and the kubelet.
    # Defender may be absent (Windows Server without the Windows-Defender
    # feature). Microsoft's reference files Add-MpPreference under the
    # Defender module, while newer releases ship it in ConfigDefender: the
    # call names whichever module has it.
    $mpModule = (Microsoft.PowerShell.Core\Get-Command -Name Add-MpPreference -ErrorAction SilentlyContinue |
        Microsoft.PowerShell.Core\Where-Object { $_.ModuleName -in 'ConfigDefender', 'Defender' } | Microsoft.PowerShell.Utility\Select-Object -First 1).ModuleName
    if ($mpModule) {
        # Defender's service may not run yet this soon after a boot, and
        # its cmdlets then fail: try for a minute. The exclusions make the
        # node faster, not work, so the build goes on without them.
        $excluded = $false
        foreach ($try in 1, 2, 3, 4, 5, 6) {
            try {
                & "$mpModule\Add-MpPreference" -ExclusionProcess @("$ctrd\containerd.exe", "$ctrd\containerd-shim-runhcs-v1.exe", "$ctrd\ctr.exe", 'C:\k\kubelet.exe') `
                    -ExclusionPath @('C:\ProgramData\containerd', 'C:\var\lib\kubelet', 'C:\var\log\containerd', 'C:\var\log\kubelet', 'C:\var\log\pods', 'C:\var\log\containers')
                $excluded = $true
                break
            } catch {
                Say "phase 2: Defender refused the exclusions (try $try of 6): $($_.Exception.Message)"
                Microsoft.PowerShell.Utility\Start-Sleep -Seconds 10
            }
        }
        if ($excluded) {
            Say "phase 2: excluded containerd's and the kubelet's files from $mpModule's scans"
        } else {
            Say 'phase 2: going on without Defender exclusions (pulls and pod starts will be slower)'
        }
    } else {
        Say 'phase 2: no Microsoft Defender here, so no exclusions to add'
    }

    Say 'phase 2: container images'
    foreach ($image in Microsoft.PowerShell.Management\Get-ChildItem -LiteralPath "$work\images" -Filter '*.tar') {
        Say "phase 2: importing $($image.Name)"
        Invoke-Native "ctr import $($image.Name)" {
            & "$ctrd\ctr.exe" -n k8s.io images import --all-platforms $image.FullName
        }
    }

    Say 'phase 2: OpenSSH server'
    if (-not (Microsoft.PowerShell.Management\Get-Service -Name sshd -ErrorAction SilentlyContinue)) {
        $ssh = "$env:ProgramFiles\OpenSSH"
        Microsoft.PowerShell.Management\Copy-Item -Recurse -Force -Path "$work\openssh\OpenSSH-Win64" -Destination $ssh
        Clear-ReadOnly $ssh
        Install-OpenSSH $ssh
    }
    # PowerShell as the login shell: hwk's node handle speaks it.
    New-RegistryKey 'HKLM:\SOFTWARE\OpenSSH'
    Microsoft.PowerShell.Management\New-ItemProperty -Force -Path 'HKLM:\SOFTWARE\OpenSSH' -Name DefaultShell -PropertyType String `
        -Value "$env:SystemRoot\System32\WindowsPowerShell\v1.0\powershell.exe" | Microsoft.PowerShell.Core\Out-Null
    # Keys only; administrators' keys come from
    # administrators_authorized_keys (sshd's default Match block), which
    # hwk-seed writes on each clone's first boot. A start type first: a
    # preinstalled sshd (Windows Server 2025) may be Disabled, which
    # Start-Service refuses.
    Microsoft.PowerShell.Management\Set-Service -Name sshd -StartupType Manual
    Microsoft.PowerShell.Management\Start-Service -Name sshd
    Microsoft.PowerShell.Management\Stop-Service -Name sshd
    $sshdConfig = "$env:ProgramData\ssh\sshd_config"
    $text = Microsoft.PowerShell.Management\Get-Content -Raw -LiteralPath $sshdConfig
    $text = $text -replace '(?m)^#?\s*PasswordAuthentication\s+\w+', 'PasswordAuthentication no'
    $text = $text -replace '(?m)^#?\s*PubkeyAuthentication\s+\w+', 'PubkeyAuthentication yes'
    # hwk sends files to a node over SFTP, never through PowerShell's
    # stdin (pkg/node): Win32-OpenSSH's own sshd_config has the subsystem.
    if ($text -notmatch '(?m)^\s*Subsystem\s+sftp\s') {
        throw "phase 2: $sshdConfig has no 'Subsystem sftp' line, and hwk copies files to nodes over SFTP"
    }
    # -Force: sshd made the file as a copy of sshd_config_default, with
    # its attributes.
    Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath $sshdConfig -Value $text -Encoding ascii
    Microsoft.PowerShell.Management\Set-Service -Name sshd -StartupType Automatic
    Add-FirewallRule 'OpenSSH-Server-In-TCP' 'OpenSSH Server (hwk)' TCP 22

    Say 'phase 2: first boot (hwk-seed)'
    $hwk = "$env:ProgramFiles\hwk"
    Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $hwk | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Copy-Item -Force -LiteralPath "$work\bin\hwk-seed.exe" -Destination "$hwk\hwk-seed.exe"
    $action = ScheduledTasks\New-ScheduledTaskAction -Execute "$hwk\hwk-seed.exe"
    $trigger = ScheduledTasks\New-ScheduledTaskTrigger -AtStartup
    # hwk-seed retries inside itself: Task Scheduler's RestartCount
    # re-runs a task only when it could not be started, never when its
    # program exits non-zero (MS-TSCH 2.5.4.2, RestartOnFailure).
    ScheduledTasks\Register-ScheduledTask -TaskName 'hwk-seed' -Action $action -Trigger $trigger -Settings (New-TaskSettings 2) -User 'SYSTEM' -RunLevel Highest -Force | Microsoft.PowerShell.Core\Out-Null
    # Insurance for each clone's first boot, where nobody has seen the
    # AtStartup trigger fire yet (it is Setup's OOBE boot): Setup runs
    # SetupComplete.cmd as SYSTEM once it has finished, before the logon
    # screen, and it starts the task. A start while the task runs is
    # ignored (MultipleInstances IgnoreNew, the default). Nothing in it
    # restarts the machine: Setup would not run the rest of it again.
    $scripts = "$env:SystemRoot\Setup\Scripts"
    Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path $scripts | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Set-Content -Force -LiteralPath "$scripts\SetupComplete.cmd" -Encoding ascii -Value @(
        '@echo off',
        'rem hwk: start hwk-seed, in case its AtStartup trigger did not fire at this first boot',
        'schtasks.exe /run /tn hwk-seed',
        'exit /b 0')

    Say 'phase 2: generalizing'
    # Every clone must make its own host keys, or get the one hwk pinned
    # from its seed.
    Microsoft.PowerShell.Management\Remove-Item -Force -Path "$env:ProgramData\ssh\ssh_host_*" -ErrorAction SilentlyContinue
    # The image keeps no Administrator password: Winlogon's copy from
    # the build's automatic logon goes, and so does every answer file
    # Setup would read at a clone's first boot ahead of the one on the
    # clone's seed, which gives the clone its own password (Setup's
    # implicit search: the registry's UnattendFile, then Panther, before
    # removable media; "Windows Setup Automation Overview"). Setup cached
    # the build's Autounattend.xml in Panther.
    foreach ($name in 'DefaultPassword', 'AutoAdminLogon', 'AutoLogonCount') {
        Microsoft.PowerShell.Management\Remove-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon' -Name $name -ErrorAction SilentlyContinue
    }
    Microsoft.PowerShell.Management\Remove-ItemProperty -Path 'HKLM:\SYSTEM\Setup' -Name 'UnattendFile' -ErrorAction SilentlyContinue
    foreach ($answer in "$env:SystemRoot\Panther\unattend.xml", "$env:SystemRoot\Panther\autounattend.xml", "$env:SystemRoot\Panther\Unattend\unattend.xml", "$env:SystemRoot\Panther\Unattend\autounattend.xml", "$env:SystemRoot\System32\Sysprep\unattend.xml", "$env:SystemDrive\unattend.xml", "$env:SystemDrive\autounattend.xml") {
        Microsoft.PowerShell.Management\Remove-Item -Force -LiteralPath $answer -ErrorAction SilentlyContinue
    }
    ScheduledTasks\Unregister-ScheduledTask -TaskName $taskName -Confirm:$false
    Microsoft.PowerShell.Management\Remove-Item -Recurse -Force -LiteralPath $work
    Microsoft.PowerShell.Management\Remove-Item -Force -LiteralPath $phaseFile
    # Without /mode:vm: one build's disk is converted for every driver
    # (qcow2 for libvirt, VHDX for Hyper-V, VDI for VirtualBox), while
    # Microsoft's "Sysprep Command-Line Options" limits a disk generalized
    # with /mode:vm to the hypervisor and hardware profile it was made on.
    # A full generalize lets each clone detect its own hardware at first
    # boot, which costs that boot some time instead.
    #
    # sysprep.exe is a Windows (GUI) program, which & would start without
    # waiting or reading its exit status; Start-Process -Wait does both.
    # /quit rather than /shutdown, so its outcome is reported before the
    # power goes. No /unattend: sysprep would cache its answer file in
    # Panther, where it outranks the seed's.
    Say 'phase 2: sysprep'
    $sysprep = Microsoft.PowerShell.Management\Start-Process -FilePath "$env:SystemRoot\System32\Sysprep\sysprep.exe" `
        -ArgumentList '/generalize', '/oobe', '/quit', '/quiet' -Wait -PassThru
    # Microsoft documents no exit statuses for sysprep; a generalized
    # machine says so in its image state, which is what decides (as the
    # image pipelines that run sysprep check it).
    $state = (Microsoft.PowerShell.Management\Get-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State' -ErrorAction SilentlyContinue).ImageState
    Say "phase 2: sysprep exited with status $($sysprep.ExitCode); the image state is $state"
    if ($state -ne 'IMAGE_STATE_GENERALIZE_RESEAL_TO_OOBE') {
        foreach ($log in 'setuperr.log', 'setupact.log') {
            $path = "$env:SystemRoot\System32\Sysprep\Panther\$log"
            if (Microsoft.PowerShell.Management\Test-Path -LiteralPath $path) {
                foreach ($line in Microsoft.PowerShell.Management\Get-Content -LiteralPath $path -Tail 15) {
                    Say "$($log): $line"
                }
            }
        }
        throw "sysprep did not generalize the machine (status $($sysprep.ExitCode), image state $state); its logs are in $env:SystemRoot\System32\Sysprep\Panther"
    }
    # Without /unattend sysprep caches no answer file; one there now
    # (from a disc's, say) would outrank every clone's seed, and could
    # hold the build's password.
    foreach ($answer in "$env:SystemRoot\Panther\unattend.xml", "$env:SystemRoot\Panther\autounattend.xml") {
        if (Microsoft.PowerShell.Management\Test-Path -LiteralPath $answer) {
            throw "sysprep left an answer file, $answer, which a clone's Setup would read instead of its seed's"
        }
    }
    Say 'done: sysprep generalized the disk; powering off'
    Microsoft.PowerShell.Management\Stop-Computer -Force
}

Microsoft.PowerShell.Host\Start-Transcript -Append -Path 'C:\hwk-provision.log' | Microsoft.PowerShell.Core\Out-Null
try {
    switch (Get-Phase) {
        1 { Invoke-Phase1 }
        2 { Invoke-Phase2 }
        default { throw "unknown phase $(Get-Phase)" }
    }
} catch {
    # One line: the host reads the console line by line, and the rest of
    # a long message is in the transcript.
    Say "FAILED: $(($_.Exception.Message -split "`n")[0].Trim()) (at provision.ps1 line $($_.InvocationInfo.ScriptLineNumber))"
    Say 'the full log is C:\hwk-provision.log in the guest; powering off'
    Microsoft.PowerShell.Management\Stop-Computer -Force
} finally {
    Microsoft.PowerShell.Host\Stop-Transcript | Microsoft.PowerShell.Core\Out-Null
}
