package node

import (
	"fmt"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Fixed cluster IPs of the add-ons' services.
const (
	IngressServiceIP = "10.96.0.80" // Traefik: :80 web, :443 websecure; forwarded from loopback
	IngressNamespace = "af-ingress"
)

// rbacAddons grants the enforcers what they read. kube-router is a test-only
// component here and gets cluster-admin; kube-network-policies gets its DaemonSet's rules
// (upstream's install.yaml: read pods, namespaces, nodes, network policies and the
// admin-network-policy kinds).
func rbacAddons() string {
	return clusterAdmin("af-kube-router", "af:kube-router") + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: af:kube-network-policies
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
- apiGroups: [policy.networking.k8s.io]
  resources: [adminnetworkpolicies, baselineadminnetworkpolicies]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: af:kube-network-policies
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: af:kube-network-policies
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: af:kube-network-policies
`
}

// clusterAdmin binds cluster-admin to user, as binding name (the test-only enforcers').
func clusterAdmin(name, user string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: %s
`, name, user)
}

// coreDNSAddon runs CoreDNS as the cluster resolver. Names outside the
// cluster are forwarded only to the fake internet's resolver.
func coreDNSAddon() string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: af:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: af:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: af:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        forward . %[1]s:53
        cache 5
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: %[2]s
        imagePullPolicy: IfNotPresent
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        resources:
          requests: {cpu: 50m, memory: 40Mi}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: %[3]s
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`, layout.ResolverIP, CoreDNSImage, layout.ClusterDNS)
}

// traefikAddon runs Traefik as an ordinary pod (so NetworkPolicies can name it
// and the guard covers it) behind a fixed cluster IP that the node forwards
// from loopback. Version checks and usage reports are off.
func traefikAddon() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: traefik
  namespace: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: af:traefik
rules:
- apiGroups: [""]
  resources: [services, endpoints, secrets, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: af:traefik
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: af:traefik
subjects:
- kind: ServiceAccount
  name: traefik
  namespace: %[1]s
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: traefik
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: traefik.io/ingress-controller
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: traefik
  namespace: %[1]s
  labels: {app.kubernetes.io/name: traefik}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: traefik}
  template:
    metadata:
      labels: {app.kubernetes.io/name: traefik}
    spec:
      serviceAccountName: traefik
      containers:
      - name: traefik
        image: %[2]s
        imagePullPolicy: IfNotPresent
        args:
        - --global.checknewversion=false
        - --global.sendanonymoususage=false
        - --entryPoints.web.address=:8000
        - --entryPoints.websecure.address=:8443
        - --entryPoints.traefik.address=:9000
        - --ping=true
        - --providers.kubernetesingress=true
        - --providers.kubernetesingress.ingressendpoint.ip=127.0.0.1
        ports:
        - {name: web, containerPort: 8000}
        - {name: websecure, containerPort: 8443}
        readinessProbe:
          httpGet: {path: /ping, port: 9000}
          periodSeconds: 2
        resources:
          requests: {cpu: 50m, memory: 50Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: traefik
  namespace: %[1]s
spec:
  clusterIP: %[3]s
  selector: {app.kubernetes.io/name: traefik}
  ports:
  - {name: web, port: 80, targetPort: 8000}
  - {name: websecure, port: 443, targetPort: 8443}
`, IngressNamespace, TraefikImage, IngressServiceIP)
}
